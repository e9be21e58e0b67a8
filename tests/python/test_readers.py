"""A reader of an arena (reader_uids) gets read-only buffers: a write raises, it never faults."""

from conftest import run_as_nobody


def test_reader_buffers_are_read_only(client, daemon, tmp_path):
    r = client.alloc(4096, arena="feed")
    memoryview(r)[:5] = b"frame"
    token = r.share()
    out = run_as_nobody(daemon, tmp_path, f"""
        import numpy
        r = c.attach({token!r})
        m = memoryview(r)
        assert m.readonly and bytes(m[:5]) == b"frame"
        try:
            m[0] = 0
        except TypeError:
            pass
        else:
            raise SystemExit("a read-only range took a write")
        a = numpy.frombuffer(r, numpy.uint8)
        assert not a.flags.writeable and bytes(a[:5]) == b"frame"
        del a, m
        try:
            c.alloc(4096, arena="feed")
        except vad.Error as e:
            assert e.code == vad.EREADONLY, e
        else:
            raise SystemExit("a reader allocated")
        r.free()
        print("read only")
    """)
    assert out == "read only"
    assert not memoryview(r).readonly  # the writer's own buffer stays writable
    r.free()
