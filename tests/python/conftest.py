"""Fixtures of the vad Python tests: a real daemon from the build tree, as the C
integration tests start one (tests/common/daemon.c): a config in a temporary directory,
the daemon in the foreground with its log there, ready once its socket accepts.

VAD_BUILD_DIR names the build tree (default: build/ of this checkout); the vad package is
imported from VAD_BUILD_DIR/python unless VAD_PYTHON_INSTALLED=1 (an installed package).
VAD_TEST_MODE=asan|tsan stretches the deadlines, as the C harness does.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("VAD_BUILD_DIR") or os.path.join(ROOT, "build"))
if os.environ.get("VAD_PYTHON_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(BUILD, "python"))

import vad  # noqa: E402

MODE = os.environ.get("VAD_TEST_MODE", "normal")
# As under tests/run-tests: a connection the daemon dropped stays dropped (VAD_EGONE).
os.environ.setdefault("VAD_RECONNECT_MS", "0")
FACTOR = {"asan": 4, "tsan": 8}.get(MODE, 1)

# Sizes the tests rely on: quota_client is under the default arena's size (QuotaExceeded
# before NoSpace); "small" fills up (NoSpace); "locked" admits another uid only.
QUOTA = 96 << 20
DEFAULT_ARENA = 256 << 20
SMALL_ARENA = 1 << 20


def timeout(seconds):
    """A deadline in seconds, stretched for sanitizer builds."""
    return seconds * FACTOR


def wait_until(pred, seconds=10.0, step=0.01):
    """Poll pred() until it is true or the (stretched) deadline passes; its last value."""
    deadline = time.monotonic() + timeout(seconds)
    while True:
        value = pred()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


def process_state(pid):
    """The one-letter state of /proc/PID/stat ("T" once a SIGSTOP took effect)."""
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


class Daemon:
    """One vad process on a private socket."""

    def __init__(self, extra="", arenas=None):
        self.dir = tempfile.mkdtemp(prefix="vad-pytest.")
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "vad.sock")
        self.log_path = os.path.join(self.dir, "vad.log")
        self.conf = os.path.join(self.dir, "vad.conf")
        with open(self.conf, "w") as f:
            f.write(
                "[vad]\n"
                f"socket = {self.socket}\n"
                "socket_mode = 0666\nworkers = 2\n"
                f"stats_db = {self.dir}/stats.db\nstats_interval = 2s\nlog_level = info\n"
                f"{extra}\n"
            )
            f.write(arenas or f"[arena default]\nsize = {DEFAULT_ARENA >> 20}M\n")
        self.proc = None

    def start(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
                            "WATCHDOG_USEC", "VAD_SOCKET", "LD_PRELOAD")}
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [os.path.join(BUILD, "vad"), "-c", self.conf, "--foreground"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        log.close()
        deadline = time.monotonic() + timeout(10)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vad exited during startup ({self.proc.returncode}):\n"
                                   + self.log())
            if self._accepts():
                return self
            time.sleep(0.01)
        self.proc.kill()
        raise RuntimeError("vad did not accept on its socket in time:\n" + self.log())

    def _accepts(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.socket)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-6000:]
        except OSError:
            return "(no log)"

    def stop(self):
        """SIGTERM; the exit status must be 0 and the log free of sanitizer reports."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout(10))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("vad did not stop on SIGTERM:\n" + self.log())
        log = self.log()
        for report in ("ERROR: AddressSanitizer", "runtime error:", "ThreadSanitizer"):
            assert report not in log, log
        return rc

    def destroy(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


ARENAS = (
    f"[arena default]\nsize = {DEFAULT_ARENA >> 20}M\n\n"
    f"[arena small]\nsize = {SMALL_ARENA >> 20}M\n\n"
    "[arena locked]\nsize = 1M\nallow_uids = 54321\n\n"
    "[arena own]\nsize = 1M\ntenancy = uid\n\n"
    "[arena feed]\nsize = 1M\nallow_uids = 0\nreader_uids = 65534\n"
)


@pytest.fixture(scope="session")
def daemon():
    """The daemon most tests share."""
    d = Daemon(extra=f"quota_client = {QUOTA >> 20}M", arenas=ARENAS).start()
    yield d
    try:
        assert d.stop() == 0, d.log()
    finally:
        d.destroy()


@pytest.fixture
def own_daemon():
    """A daemon of the test's own, which it may stop, pause or kill."""
    d = Daemon().start()
    yield d
    if d.proc.poll() is None:
        os.kill(d.proc.pid, signal.SIGCONT)
    d.destroy()


@pytest.fixture
def client(daemon):
    """A client of the shared daemon; the test must leave it holding nothing."""
    c = vad.Client(daemon.socket, name="pytest")
    yield c
    if not c.closed:
        c.close()


@pytest.fixture
def observer(daemon):
    """A second (admin) client, to see the daemon's side."""
    with vad.Client(daemon.socket, name="observer") as c:
        yield c


def session_of(observer, client):
    """The daemon's record of client's session (vad.Client.clients())."""
    sid = client.session["session_id"]
    for s in observer.clients():
        if s["session_id"] == sid:
            return s
    return None


def busy_bytes(observer, arena="default"):
    """Bytes allocated in arena, by every client."""
    return observer.stats_detail(arena)["arenas"][0]["busy_bytes"]


def run_as_nobody(daemon, tmp_path, body):
    """Run body (Python, with `import vad` and c = vad.Client(daemon's socket) before it) as
    user nobody, which the daemon counts as neither admin nor allowed everywhere (root
    is both); its stripped stdout. Skips unless root."""
    if os.getuid() != 0:
        pytest.skip("needs root to run a client as another user")
    code = f"import vad\nc = vad.Client({daemon.socket!r})\n" + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(vad.__file__)))
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=str(tmp_path), timeout=timeout(60))
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout.strip()
