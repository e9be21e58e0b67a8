"""NumPy arrays over ranges: Client.ndarray, attach_ndarray, Range.ndarray, range_of, and
the module without NumPy."""

import subprocess
import sys

import numpy
import pytest

import vad


def test_ndarray_is_zeroed_shared_and_freed_with_the_array(client, daemon):
    a = client.ndarray((3, 4), "int64")
    assert a.shape == (3, 4) and a.dtype == numpy.int64 and not a.any()
    r = vad.range_of(a)
    assert isinstance(r, vad.Range) and r.size == 4096
    a[1, 2] = 42
    with vad.Client(daemon.socket) as other:
        b = other.attach_ndarray(r.share(), (3, 4), numpy.int64)
        assert b[1, 2] == 42
        b[0, 0] = -1
        assert a[0, 0] == -1
        assert vad.range_of(b).client is other
        with pytest.raises(BufferError):
            vad.range_of(b).free()
        del b
    with pytest.raises(BufferError):
        r.free()
    del r, a
    assert client.stats()["held_ranges"] == 0


def test_ndarray_default_dtype_and_arena(client):
    a = client.ndarray(10)
    assert a.dtype == numpy.float64 and a.shape == (10,)
    b = client.ndarray([2, 2], arena="small")
    assert vad.range_of(b).arena == "small"


def test_range_ndarray(client):
    with client.alloc(4096) as r:
        whole = r.ndarray()
        assert whole.dtype == numpy.uint8 and whole.size == 4096
        f = r.ndarray((2, 8), "float32")
        f[1, 7] = 1.5
        assert numpy.frombuffer(r, numpy.float32)[15] == 1.5
        with pytest.raises(ValueError, match="does not fit"):
            r.ndarray((4097,), "uint8")
        del whole, f


def test_attach_ndarray_too_large_frees_the_attach(client, daemon):
    r = client.alloc(4096)
    with vad.Client(daemon.socket) as other:
        with pytest.raises(ValueError, match="does not fit"):
            other.attach_ndarray(r.share(), (1024, 1024), "uint8")
        assert other.stats()["held_ranges"] == 0
    r.free()


def test_bad_shapes(client):
    with pytest.raises(ValueError):
        client.ndarray((-1, 2))
    with pytest.raises(TypeError):
        client.ndarray("x")
    with pytest.raises(TypeError):
        vad.range_of(numpy.zeros(3))
    with pytest.raises(TypeError):
        vad.range_of(42)


def test_without_numpy(daemon):
    code = (
        "import sys; sys.modules['numpy'] = None\n"
        "import vad\n"
        f"c = vad.Client({daemon.socket!r})\n"
        "r = c.alloc(4096); memoryview(r)[0] = 1; r.free()\n"
        "try:\n"
        "    c.ndarray(4)\n"
        "except ImportError as e:\n"
        "    print('ImportError:', e)\n"
        "print(c.stats()['held_ranges'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, env=_env()).stdout
    assert "ImportError: vad: ndarray needs NumPy" in out
    assert out.strip().endswith("0")


def _env():
    import os

    return dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(vad.__file__)))
