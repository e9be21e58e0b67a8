"""Every exception class, its code and the daemon's sentence."""

import os
import signal

import pytest

import vad
from conftest import QUOTA, SMALL_ARENA, run_as_nobody, wait_until


def test_hierarchy_and_class_codes():
    for cls, code in ((vad.QuotaExceeded, vad.EQUOTA), (vad.NoSpace, vad.ENOSPC),
                      (vad.TokenInvalid, vad.ETOKEN), (vad.PermissionDenied, vad.EPERM),
                      (vad.DaemonGone, vad.EGONE)):
        assert issubclass(cls, vad.Error) and cls.code == code and cls.__doc__
    assert issubclass(vad.Error, Exception) and vad.Error.code is None
    assert vad.strerror(vad.ENOSPC) == "the arena has no free range that large"
    assert vad.strerror(12345) == "unknown vad error code"
    assert vad.OK == 0 and vad.EINVAL == -1 and vad.ENOHELLO == -20 and vad.EREADONLY == -24


def test_quota_exceeded(client):
    with pytest.raises(vad.QuotaExceeded) as e:
        client.alloc(QUOTA + 4096)
    assert e.value.code == vad.EQUOTA
    assert "quota" in str(e.value)
    assert client.stats()["held_ranges"] == 0


def test_no_space(client):
    r = client.alloc(SMALL_ARENA, arena="small")
    with pytest.raises(vad.NoSpace) as e:
        client.alloc(4096, arena="small")
    assert e.value.code == vad.ENOSPC and str(e.value)
    r.free()


def test_token_invalid(client):
    with pytest.raises(vad.TokenInvalid) as e:
        client.attach("A" * vad.TOKEN_LEN)
    assert e.value.code == vad.ETOKEN and "token" in str(e.value)
    with pytest.raises(vad.TokenInvalid):
        client.attach("short")


def test_permission_denied(daemon, tmp_path):
    out = run_as_nobody(daemon, tmp_path, """
        try:
            c.alloc(4096, arena="locked")
        except vad.PermissionDenied as e:
            assert e.code == vad.EPERM and "locked" in str(e), str(e)
            print("denied")
    """)
    assert out == "denied"


def test_other_codes_raise_error(client):
    cases = ((lambda: client.alloc(4096, arena="no-such-arena"), vad.ENOARENA),
             (lambda: client.alloc(1 << 40), vad.ESIZE),
             (lambda: client.alloc(0), vad.ESIZE))
    for call, code in cases:
        with pytest.raises(vad.Error) as e:
            call()
        assert type(e.value) is vad.Error
        assert e.value.code == code, (code, e.value.code, str(e.value))
        assert str(e.value)
    with pytest.raises(vad.Error) as e:
        client.alloc(4096, align=3 << 20)
    assert e.value.code in (vad.EALIGN, vad.EINVAL)
    with pytest.raises(OverflowError):
        client.alloc(-1)


def test_daemon_gone(own_daemon):
    c = vad.Client(own_daemon.socket)
    r = c.alloc(4096)
    memoryview(r)[0] = 5
    os.kill(own_daemon.proc.pid, signal.SIGKILL)
    own_daemon.proc.wait()

    def gone():
        try:
            c.stats()
        except vad.DaemonGone as e:
            return e
        return None

    e = wait_until(gone)
    assert e is not None and e.code == vad.EGONE
    with pytest.raises(vad.DaemonGone):
        c.alloc(4096)
    with pytest.raises(vad.DaemonGone):
        r.share()
    assert memoryview(r)[0] == 5  # the mapping stays until close
    with pytest.raises(vad.DaemonGone):
        r.free()
    c.close()
    with pytest.raises(vad.DaemonGone) as e2:
        vad.Client(own_daemon.socket)
    assert e2.value.code == vad.ECONNECT
