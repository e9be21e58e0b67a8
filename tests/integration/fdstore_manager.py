"""fdstore_manager.py - a stand-in for systemd's fd store, speaking the real protocol, for
tests/integration/test_restart.py.

It binds a datagram socket (the daemon's $NOTIFY_SOCKET) and reads sd_notify messages:
FDSTORE=1 with FDNAME= stores the fds that came with the message (SCM_RIGHTS), FDSTOREREMOVE=1
with FDNAME= closes and forgets every fd stored under that name, READY=1 and STOPPING=1 are
noted. start() runs the daemon the way systemd starts a service: the stored fds at 3, 4, ...
with LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID (set in the child to its own pid).
Like systemd it reads the socket all the time (a thread): a datagram socket holds only
net.unix.max_dgram_qlen messages (10), and a daemon sending more (STATUS= every tick, a
tenant arena stored) would block in sendmsg until they are read.
"""
import array
import os
import select
import signal
import socket
import threading
import time


class Manager:
    def __init__(self, notify_path):
        self.path = notify_path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(notify_path)
        self.sock.setblocking(False)  # two threads read it: a poll, then a read that never waits
        self.stored = []  # [name, fd], in the order they came (as systemd keeps them)
        self.ready = False
        self.stopping = False
        self.removed = []
        self.pid = None
        self.status = None
        self.lock = threading.RLock()  # the stored fds, against the reading thread
        threading.Thread(target=self._read_forever, daemon=True).start()

    def _read_forever(self):
        while True:
            self.pump(0.2)

    def names(self):
        with self.lock:
            return [n for n, _ in self.stored]

    def fd_of(self, name):
        with self.lock:
            for n, fd in self.stored:
                if n == name:
                    return fd
        return None

    def replace_fd(self, name, fd):
        """Put fd in place of what is stored under name (a test damaging the store)."""
        with self.lock:
            self._replace_locked(name, fd)

    def _replace_locked(self, name, fd):
        for i, (n, old) in enumerate(self.stored):
            if n == name:
                os.close(old)
                self.stored[i] = [n, fd]
                return
        raise KeyError(name)

    def _handle(self, data, fds):
        fields = {}
        for line in data.decode("utf-8", "replace").splitlines():
            k, _, v = line.partition("=")
            fields[k] = v
        if fields.get("FDSTORE") == "1":
            name = fields.get("FDNAME", "stored")
            for fd in fds:
                self.stored.append([name, fd])
            fds = []
        if fields.get("FDSTOREREMOVE") == "1":
            name = fields.get("FDNAME")
            keep = []
            for n, fd in self.stored:
                if n == name:
                    os.close(fd)
                else:
                    keep.append([n, fd])
            self.stored = keep
            self.removed.append(name)
        if fields.get("READY") == "1":
            self.ready = True
        if fields.get("STOPPING") == "1":
            self.stopping = True
        for fd in fds:  # fds without FDSTORE=1: systemd closes them too
            os.close(fd)

    def pump(self, timeout):
        """Handle the messages that arrive within timeout seconds (at least one poll)."""
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            try:
                r, _, _ = select.select([self.sock], [], [], left if left > 0 else 0.001)
                if not r:
                    return
                with self.lock:
                    data, fds, _, _ = socket.recv_fds(self.sock, 65536, 64)
                    self._handle(data, fds)
            except BlockingIOError:
                pass
            if time.monotonic() >= deadline:
                return

    def start(self, argv, stderr_path, extra_env=None, sockets=()):
        """Start the daemon with the stored fds, as systemd would: the sockets of socket
        activation ([name, fd] pairs) first, then the fd store's."""
        self.ready = False
        self.stopping = False
        env = dict(os.environ)
        env["NOTIFY_SOCKET"] = self.path
        for k in ("LISTEN_FDS", "LISTEN_FDNAMES", "LISTEN_PID"):
            env.pop(k, None)
        if extra_env:
            env.update(extra_env)
        with self.lock:
            fds = [fd for _, fd in sockets] + [fd for _, fd in self.stored]
            names = [n for n, _ in sockets] + self.names()
        err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(err, 2)
                # Out of the way first, then down to 3, 4, ... (no overlap clobbers).
                high = [os.dup(fd) for fd in fds]
                for i, fd in enumerate(high):
                    os.dup2(fd, 3 + i, inheritable=True)
                if fds:
                    env["LISTEN_FDS"] = str(len(fds))
                    env["LISTEN_FDNAMES"] = ":".join(names)
                    env["LISTEN_PID"] = str(os.getpid())
                os.closerange(3 + len(fds), 1024)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        os.close(err)
        self.pid = pid
        self.status = None
        return pid

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.ready and time.monotonic() < deadline:
            self.pump(0.05)
            if self.exited():
                return False
        return self.ready

    def exited(self):
        if self.status is not None:
            return True
        pid, st = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return False
        self.status = st
        return True

    def wait_exit(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.02)
            if self.exited():
                self.pump(0.05)  # what it sent last
                return os.waitstatus_to_exitcode(self.status)
        raise TimeoutError("the daemon did not exit")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        os.kill(self.pid, sig)
        return self.wait_exit(timeout)
