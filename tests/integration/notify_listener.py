#!/usr/bin/env python3
"""notify_listener.py - a stand-in for systemd's notification socket, for
tests/integration/test_packaging.sh (Type=notify readiness and watchdog).

    notify_listener.py SOCKET MARKER TIMEOUT_S

Binds a datagram socket at SOCKET and reads sd_notify messages. Once it has seen READY=1, a
STATUS= line and two WATCHDOG=1 pings it writes MARKER (the test then stops the daemon) and
waits for STOPPING=1. Prints every message; exits 0 when all of them came, 1 otherwise.
"""
import socket
import sys
import time


def main():
    path, marker, timeout_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    ready = status = stopping = False
    watchdogs = 0
    marked = False
    deadline = time.monotonic() + timeout_s
    while not stopping:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except socket.timeout:
            break
        for line in data.decode("utf-8", "replace").splitlines():
            print("notify: " + line, flush=True)
            ready |= line == "READY=1"
            status |= line.startswith("STATUS=")
            watchdogs += line == "WATCHDOG=1"
            stopping |= line == "STOPPING=1"
        if not marked and ready and status and watchdogs >= 2:
            with open(marker, "w") as f:
                f.write("ok\n")
            marked = True
    print("notify: READY=1 %s, STATUS= %s, WATCHDOG=1 x%d, STOPPING=1 %s"
          % (ready, status, watchdogs, stopping), flush=True)
    return 0 if ready and status and watchdogs >= 2 and stopping else 1


if __name__ == "__main__":
    sys.exit(main())
