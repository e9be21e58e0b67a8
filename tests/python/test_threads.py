"""Threads on one Client: the GIL is released while waiting on the daemon, and calls from
many threads are pipelined on the connection."""

import os
import signal
import threading

import vad
from conftest import process_state, wait_until


def test_many_threads_share_one_client(client, observer):
    errors = []
    per_thread = 300

    def work(i):
        try:
            mine = []
            for k in range(per_thread):
                r = client.alloc(4096 * (1 + (k % 3)))
                memoryview(r)[0] = i
                mine.append(r)
                if len(mine) > 8:
                    victim = mine.pop(0)
                    assert memoryview(victim)[0] == i
                    victim.free()
            token = mine[0].share()
            other = client.attach(token)
            assert other.refs == 2
            other.free()
            client.free_batch(mine)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert client.stats()["held_ranges"] == 0


def test_gil_is_released_while_waiting(own_daemon):
    c = vad.Client(own_daemon.socket)
    done = threading.Event()

    def blocked_call():
        c.stats()
        done.set()

    os.kill(own_daemon.proc.pid, signal.SIGSTOP)  # the daemon answers nothing now
    try:
        assert wait_until(lambda: process_state(own_daemon.proc.pid) == "T", 30)
        t = threading.Thread(target=blocked_call)
        t.start()
        # This thread runs Python (the polling) while the other waits in libvad: with the GIL
        # held there, it could never see the call in flight.
        assert wait_until(lambda: c.calls_in_flight == 1, 30), "the stats call never got in"
        spins = 0
        while spins < 100000:
            spins += 1
        assert not done.is_set()
        assert c.calls_in_flight == 1
    finally:
        os.kill(own_daemon.proc.pid, signal.SIGCONT)
    t.join(30)
    assert done.is_set()
    c.close()


def test_ranges_dropped_in_other_threads(client):
    rs = client.alloc_batch([4096] * 64)

    def drop(part):
        part.clear()

    parts = [rs[i::4] for i in range(4)]
    del rs
    threads = [threading.Thread(target=drop, args=(p,)) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert client.stats()["held_ranges"] == 0
