"""vad.Client: connecting, the session, closing, and what a closed client does."""

import os
import subprocess
import sys
import threading

import pytest

import vad
from conftest import process_state, session_of, wait_until


def test_connect_session_and_repr(daemon, observer):
    with vad.Client(daemon.socket, name="named-client") as c:
        s = c.session
        assert s["socket_path"] == daemon.socket
        assert s["default_arena"] == "default"
        assert s["server"].startswith("vad ")
        assert s["protocol_version"] >= 1
        assert s["admin"] is True or s["admin"] is False
        assert str(s["session_id"]) in repr(c)
        assert session_of(observer, c)["name"] == "named-client"
        assert session_of(observer, c)["pid"] == os.getpid()
        assert not c.closed
    assert c.closed
    assert "closed" in repr(c)


def test_socket_as_pathlike_and_default_from_env(daemon):
    import pathlib

    with vad.Client(pathlib.Path(daemon.socket)) as c:
        assert c.session["socket_path"] == daemon.socket
    env = dict(os.environ, VAD_SOCKET=daemon.socket,
               PYTHONPATH=os.path.dirname(os.path.dirname(vad.__file__)))
    code = "import vad; c = vad.Client(); print(c.session['socket_path'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    assert out == daemon.socket


def test_close_twice_and_use_after_close(daemon):
    c = vad.Client(daemon.socket)
    c.close()
    c.close()
    for call in (lambda: c.alloc(4096), lambda: c.stats(), lambda: c.attach("x" * 32),
                 lambda: c.session, lambda: c.arenas(), lambda: c.alloc_batch([1])):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_close_refuses_while_buffers_are_exported(client):
    r = client.alloc(4096)
    m = memoryview(r)
    with pytest.raises(BufferError, match="still exported"):
        client.close()
    assert not client.closed
    m[0] = 7
    assert client.stats()["held_ranges"] == 1
    m.release()
    client.close()
    assert client.closed
    assert r.freed
    with pytest.raises(ValueError, match="client is closed"):
        memoryview(r)
    r.free()  # the daemon dropped it with the session: nothing to do


def test_close_drops_the_session_and_its_ranges(daemon, observer):
    c = vad.Client(daemon.socket)
    rs = c.alloc_batch([4096] * 8)
    sid = c.session["session_id"]
    assert session_of(observer, c)["held_ranges"] == 8
    c.close()
    assert wait_until(lambda: all(s["session_id"] != sid for s in observer.clients()))
    assert all(r.freed for r in rs)
    del rs  # dropping ranges of a closed client sends nothing


def test_range_keeps_its_client_alive(daemon, observer):
    c = vad.Client(daemon.socket)
    sid = c.session["session_id"]
    r = c.alloc(4096)
    del c
    assert r.client.session["session_id"] == sid
    memoryview(r)[:2] = b"ok"
    assert any(s["session_id"] == sid for s in observer.clients())
    del r  # the last reference: the range is freed, then the client closes
    assert wait_until(lambda: all(s["session_id"] != sid for s in observer.clients()))


def test_connect_failure_is_daemon_gone_with_a_hint(tmp_path):
    with pytest.raises(vad.DaemonGone) as e:
        vad.Client(str(tmp_path / "nobody.sock"))
    assert e.value.code == vad.ECONNECT
    assert "nobody.sock" in str(e.value)
    assert isinstance(e.value, vad.Error)


def closing(c):
    """True once close() has begun: a new call is refused while it waits."""
    try:
        c.session
        return False
    except ValueError:
        return True


def test_close_waits_for_calls_in_flight(own_daemon):
    import signal

    # The daemon is stopped, so a stats call that got in stays in flight until it resumes.
    c = vad.Client(own_daemon.socket)
    result = {}

    def call():
        try:
            result["stats"] = c.stats()
        except Exception as e:  # noqa: BLE001
            result["error"] = e

    os.kill(own_daemon.proc.pid, signal.SIGSTOP)
    try:
        assert wait_until(lambda: process_state(own_daemon.proc.pid) == "T", 30)
        t = threading.Thread(target=call)
        t.start()
        assert wait_until(lambda: c.calls_in_flight == 1, 30), "the stats call never got in"
        closer = threading.Thread(target=c.close)
        closer.start()
        assert wait_until(lambda: closing(c), 30), "close() never began"
        assert not c.closed  # close() waits for the stats call
        assert c.calls_in_flight == 1
    finally:
        os.kill(own_daemon.proc.pid, signal.SIGCONT)
    t.join(30)
    closer.join(30)
    assert not t.is_alive() and not closer.is_alive()
    assert "stats" in result, result
    assert c.closed and c.calls_in_flight == 0


def test_classes_are_final_and_range_is_not_constructible():
    with pytest.raises(TypeError):
        vad.Range()
    with pytest.raises(TypeError):
        class Sub(vad.Client):  # noqa: F841
            pass
