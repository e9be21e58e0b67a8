"""After fork: the child gets a clear error, never uses or frees the parent's
connection, and may connect anew; the parent's session ends when the parent closes it."""

import gc
import os

import vad
from conftest import session_of, wait_until


def run_child(fn):
    """Run fn() in a forked child; its exit code (0: fn returned True)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if fn() else 3
        except BaseException:  # noqa: BLE001
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_child_gets_a_clear_error(client, daemon):
    r = client.alloc(4096)
    memoryview(r)[0] = 9

    def child():
        for call in (lambda: client.alloc(4096), client.stats, r.share, r.free,
                     lambda: memoryview(r), lambda: client.attach("x" * 32)):
            try:
                call()
            except vad.DaemonGone as e:
                assert e.code == vad.EGONE
                assert f"another process (pid {os.getppid()})" in str(e), str(e)
                assert "create a new vad.Client after fork" in str(e)
            else:
                return False
        with vad.Client(daemon.socket) as fresh:  # a new client works
            fresh.alloc(4096).free()
        client.close()  # forgets the parent's connection, sends nothing
        return client.closed

    assert run_child(child) == 0
    assert r.refs == 1 and memoryview(r)[0] == 9  # the parent still holds it
    assert client.stats()["held_ranges"] == 1
    r.free()


def test_child_gc_does_not_free_the_parents_ranges(client, observer):
    rs = [client.alloc(4096) for _ in range(4)]
    a = client.ndarray(16, "uint8")

    def child():
        global_refs = list(rs)
        rs.clear()
        del global_refs
        gc.collect()
        return True

    assert run_child(child) == 0
    assert session_of(observer, client)["held_ranges"] == 5
    client.free_batch(rs)
    del a


def test_parent_close_ends_its_session_while_a_child_lives(daemon, observer):
    c = vad.Client(daemon.socket)
    sid = c.session["session_id"]
    c.alloc(4096)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)  # live until the parent has checked
        os._exit(0)
    os.close(r)
    try:
        c.close()
        # The child's copy of the socket was closed at fork: the daemon sees the end.
        assert wait_until(lambda: all(s["session_id"] != sid for s in observer.clients()))
    finally:
        os.close(w)
        os.waitpid(pid, 0)
