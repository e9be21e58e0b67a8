"""Two Python processes: the first writes a NumPy array into a range and shares it, the
second attaches, sees the same bytes without a copy; a write by either is seen by the
other; both free, and the range returns to the daemon."""

import os
import subprocess
import sys
import textwrap

import numpy

import vad
from conftest import busy_bytes, wait_until

SHAPE = (64, 1024)

# The second process: attach, check, write back, wait for the first one's write, free.
READER = textwrap.dedent("""
    import sys, numpy, vad
    sock, token = sys.argv[1], sys.argv[2]
    c = vad.Client(sock, name="reader")
    a = c.attach_ndarray(token, (64, 1024), "float32")
    r = vad.range_of(a)
    view = numpy.frombuffer(r, numpy.float32, count=a.size)
    assert numpy.shares_memory(a, view)               # an array over the range, no copy
    assert a.__array_interface__["data"][0] == view.__array_interface__["data"][0]
    expect = numpy.arange(a.size, dtype=numpy.float32).reshape(a.shape)
    assert (a == expect).all(), "reader sees the writer's bytes"
    a[0, 0] = -1.0                                     # the writer must see this
    print("attached", r.size, flush=True)
    sys.stdin.readline()                               # the writer wrote a[63, 1023]
    assert a[63, 1023] == 12345.0, a[63, 1023]
    print("seen", flush=True)
    del a, view
    r.free()
    print("freed", c.stats()["held_ranges"], flush=True)
""")


def test_writer_and_reader_processes(daemon, observer, tmp_path):
    base = busy_bytes(observer)
    with vad.Client(daemon.socket, name="writer") as c:
        a = c.ndarray(SHAPE, "float32")
        a[:] = numpy.arange(a.size, dtype=numpy.float32).reshape(SHAPE)
        r = vad.range_of(a)
        token = r.share()
        assert busy_bytes(observer) == base + r.size
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(vad.__file__)))
        script = tmp_path / "reader.py"
        script.write_text(READER)
        p = subprocess.Popen([sys.executable, str(script), daemon.socket, token],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert p.stdout.readline().split() == ["attached", str(r.size)]
            assert a[0, 0] == -1.0  # the reader's write
            assert any(s["name"] == "reader" and s["held_ranges"] == 1
                       for s in observer.clients())
            a[63, 1023] = 12345.0
            p.stdin.write("go\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "seen"
            assert p.stdout.readline().split() == ["freed", "0"]
        finally:
            out, _ = p.communicate(timeout=60)
        assert p.returncode == 0, out
        # The reader freed its reference: the writer's still holds the range.
        assert busy_bytes(observer) == base + r.size
        del a
        r.free()
    assert wait_until(lambda: busy_bytes(observer) == base)
