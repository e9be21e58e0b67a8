"""Waiting for memory: alloc(timeout=...) waits for another client's free, or raises
vad.Error with code ETIMEDOUT; the arena's stats show the waiter meanwhile."""

import re
import threading

import pytest

import vad
from conftest import SMALL_ARENA, timeout, wait_until


def test_wait_granted_by_a_free(daemon, client, observer):
    full = client.alloc(SMALL_ARENA, arena="small")
    got = {}

    def waiter():
        with vad.Client(daemon.socket, name="waiter") as w:
            r = w.alloc(8192, arena="small", timeout=timeout(30))
            got["size"] = r.size
            r.free()

    t = threading.Thread(target=waiter)
    t.start()
    assert wait_until(lambda: observer.stats_detail("small")["arenas"][0]["waiters"] == 1)
    full.free()
    t.join(timeout(30))
    assert not t.is_alive() and got["size"] == 8192
    a = observer.stats_detail("small")["arenas"][0]
    assert a["waiters"] == 0 and a["wait_grants"] >= 1


def test_wait_times_out(daemon, client):
    full = client.alloc(SMALL_ARENA, arena="small")
    with vad.Client(daemon.socket, name="impatient") as other:
        with pytest.raises(vad.Error) as e:
            other.alloc(4096, arena="small", timeout=0.05)
        assert e.value.code == vad.ETIMEDOUT
        # The sentence gives the time waited, which a loaded machine stretches past 50 ms.
        waited = re.search(r"within the (\d+) ms this allocation waited", str(e.value))
        assert waited and int(waited.group(1)) >= 50
        with pytest.raises(vad.NoSpace):
            other.alloc_batch([4096, 4096], arena="small", timeout=0)
        with pytest.raises(ValueError):
            other.alloc(4096, arena="small", timeout=-1)
    full.free()
    assert vad.strerror(vad.ETIMEDOUT).startswith("the allocation waited for room")
