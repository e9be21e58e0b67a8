"""vad.Range: the buffer, its attributes, freeing (one, batch, by GC) and the BufferError
rule, sharing and attaching."""

import gc

import numpy
import pytest

import vad
from conftest import SMALL_ARENA, session_of


def held(client):
    return client.stats()["held_ranges"]


def test_alloc_attributes_and_zero_fill(client):
    r = client.alloc(100)
    assert len(r) == r.size == 4096  # rounded to the arena's quantum
    assert r.arena == "default"
    assert r.offset % 4096 == 0
    assert r.refs == 1
    assert not r.freed
    assert r.client is client
    assert bytes(memoryview(r)) == bytes(4096)
    assert "4096 bytes" in repr(r)
    r.free()
    assert r.freed and "freed" in repr(r)


def test_buffer_is_writable_and_not_a_copy(client):
    r = client.alloc(8192)
    m = memoryview(r)
    assert not m.readonly and m.nbytes == 8192 and m.format == "B"
    a = numpy.frombuffer(r, numpy.uint32)
    assert a.flags.writeable and a.size == 2048
    m[0:4] = (0x01020304).to_bytes(4, "little")
    assert a[0] == 0x01020304  # the array sees the memoryview's write: one memory
    a[1] = 99
    assert m[4] == 99
    assert numpy.shares_memory(a, numpy.frombuffer(r, numpy.uint8))
    del a
    m.release()
    r.free()


def test_free_refused_while_exported_frees_nothing(client, observer):
    r = client.alloc(4096)
    m = memoryview(r)
    with pytest.raises(BufferError, match="nothing was freed"):
        r.free()
    assert not r.freed and held(client) == 1
    m[0] = 1
    m.release()
    a = numpy.frombuffer(r, numpy.uint8)
    with pytest.raises(BufferError):
        r.free()
    view = a[10:20]  # a view of the array keeps the export too
    del a
    with pytest.raises(BufferError):
        r.free()
    del view
    r.free()
    assert held(client) == 0


def test_free_twice_and_use_after_free(client):
    r = client.alloc(4096)
    r.free()
    r.free()
    with pytest.raises(ValueError, match="freed"):
        memoryview(r)
    with pytest.raises(ValueError):
        len(r)
    with pytest.raises(ValueError):
        r.share()
    assert r.size == 4096  # what it was stays readable


def test_context_manager_frees(client):
    with client.alloc(4096) as r:
        memoryview(r)[0] = 1
        assert held(client) == 1
    assert r.freed and held(client) == 0


def test_gc_frees_a_dropped_range(client, observer):
    r = client.alloc(1 << 20)
    assert session_of(observer, client)["held_bytes"] == 1 << 20
    del r
    gc.collect()
    s = session_of(observer, client)
    assert s["held_bytes"] == 0 and s["held_ranges"] == 0
    # An array's range goes with the array.
    a = client.ndarray((256, 256), "float32")
    assert held(client) == 1
    del a
    assert held(client) == 0


def test_align_and_arena(client):
    r = client.alloc(4096, align=1 << 16)
    assert r.offset % (1 << 16) == 0
    addr = numpy.frombuffer(r, numpy.uint8).__array_interface__["data"][0]
    assert addr % (1 << 16) == 0
    r.free()
    s = client.alloc(4096, arena="small")
    assert s.arena == "small"
    s.free()
    with pytest.raises(vad.Error) as e:
        client.alloc(4096, align=3)
    assert e.value.code in (vad.EALIGN, vad.EINVAL)


def test_alloc_batch_and_free_batch(client):
    rs = client.alloc_batch([4096, 8192, 100, 1 << 20])
    assert [r.size for r in rs] == [4096, 8192, 4096, 1 << 20]
    assert len({r.offset for r in rs}) == 4
    assert held(client) == 4
    assert client.alloc_batch([]) == []
    client.free_batch([rs[0], rs[0]])  # a range twice: freed once
    assert rs[0].freed and held(client) == 3
    m = memoryview(rs[1])
    with pytest.raises(BufferError, match="nothing was freed"):
        client.free_batch(rs)
    assert held(client) == 3 and not any(r.freed for r in rs[1:])
    m.release()
    client.free_batch(rs)
    assert all(r.freed for r in rs) and held(client) == 0
    small = client.alloc_batch([4096, 4096], arena="small")
    assert {r.arena for r in small} == {"small"}
    client.free_batch(small)
    with pytest.raises(TypeError):
        client.free_batch([object()])


def test_free_batch_refuses_another_clients_range(client, daemon):
    with vad.Client(daemon.socket) as other:
        r = other.alloc(4096)
        with pytest.raises(ValueError, match="another"):
            client.free_batch([r])
        r.free()


def test_alloc_batch_is_all_or_nothing(client):
    half = client.alloc(SMALL_ARENA // 2, arena="small")
    with pytest.raises(vad.NoSpace):
        client.alloc_batch([SMALL_ARENA // 4] * 3, arena="small")
    assert held(client) == 1
    half.free()


def test_share_and_attach_same_memory(client, daemon):
    r = client.alloc(4096)
    memoryview(r)[:5] = b"hello"
    token = r.share()
    assert isinstance(token, str) and len(token) == vad.TOKEN_LEN
    with vad.Client(daemon.socket) as other:
        a = other.attach(token)
        assert (a.size, a.offset, a.arena) == (r.size, r.offset, r.arena)
        assert bytes(memoryview(a)[:5]) == b"hello"
        memoryview(a)[5:6] = b"!"
        assert bytes(memoryview(r)[:6]) == b"hello!"
        r.free()
        assert bytes(memoryview(a)[:6]) == b"hello!"  # the other holder keeps it
        a.free()
    with pytest.raises(vad.TokenInvalid):
        client.attach(token)  # every holder freed it


def test_attach_own_range_takes_another_reference(client):
    r = client.alloc(4096)
    again = client.attach(r.share())
    assert r.refs == again.refs == 2
    r.free()
    assert again.refs == 1
    memoryview(again)[0] = 1
    again.free()
    assert held(client) == 0


def test_attach_wants_a_str(client):
    with pytest.raises(TypeError):
        client.attach(b"x" * 32)


def test_populate_makes_every_page_resident(client):
    """populate=True (VAD_POPULATE) prefaults the pages: mincore sees them all resident."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]

    def resident(r):
        mv = memoryview(r)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(mv))
        pages = (r.size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        assert libc.mincore(addr, pages * mmap.PAGESIZE, vec) == 0, ctypes.get_errno()
        n = sum(b & 1 for b in vec.raw)
        del mv
        return n, pages

    r = client.alloc(256 * 1024, populate=True)
    n, pages = resident(r)
    assert n == pages
    r.free()
    batch = client.alloc_batch([4096, 65536, 1 << 20], populate=True)
    for r in batch:
        n, pages = resident(r)
        assert n == pages
    client.free_batch(batch)
    with pytest.raises(TypeError):
        client.alloc(4096, populate="yes please", arena=None, align=0, extra=1)
