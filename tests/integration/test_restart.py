#!/usr/bin/env python3
"""test_restart.py - a restart that loses nothing, under a stand-in for systemd's fd store
(fdstore_manager.py, the real sd_notify protocol):

  - at start vad stores its arena file and its state file (FDSTORE=1, arena.NAME, state.N);
  - a client holding 10k ranges with data in them: after a polite restart (SIGTERM) and
    after a kill -9 during a busy load (a second client allocating and freeing), the same
    busy bytes come back, the registry check (vactl check) passes, the client reads and writes
    its memory throughout, and a new client gets none of its ranges (its ranges read zero and
    the first client's data stays intact);
  - share tokens: the client shares ranges with data (plain, single use, a short and a long
    time to live) before the polite restart and before the kill -9; after each a new client
    attaches them and reads the data, the single-use token works once, the expired one is
    refused as expired, vactl tokens lists them with their terms, and once the ranges'
    holders are gone after resume_grace so are their tokens;
  - the holds of the sessions that did not come back are dropped after resume_grace;
  - a tenant arena (tenancy = uid) is stored as arena.NAME@UID when it opens; its client's
    ranges, data and a token come back after a polite restart and a kill -9 under load in
    it, and once it is idle and closes it leaves the store;
  - with the fd store full by $FDSTORE (FileDescriptorStoreMax=, systemd 254+) a tenant
    arena is not stored, the daemon says so, and the next start begins it empty;
  - a corrupted and a truncated state file are refused (exit 3, a sentence, nothing removed
    from the store); --discard-state then starts empty and drops them.

Run by test_restart.sh with VAD_BUILD_DIR set; prints "N passed, N failed".
"""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fdstore_manager import Manager  # noqa: E402

BUILD = os.environ["VAD_BUILD_DIR"]
VAD = os.path.join(BUILD, "vad")
VACTL = os.path.join(BUILD, "vactl")
N = 10000
Q = 4096

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok: " + what, flush=True)
    else:
        failed += 1
        print("FAIL: " + what, flush=True)
    return ok


def vactl(sock, *args):
    r = subprocess.run([VACTL, "--socket", sock, "--json"] + list(args), capture_output=True,
                       text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def busy(sock):
    rc, out, _ = vactl(sock, "stats")
    return json.loads(out)["totals"]["busy_bytes"] if rc == 0 else None


def cpu_seconds(pid):
    """The CPU time (user + system) process pid has used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_loader(sock, arena=None):
    """A client that allocates, shares and frees in a loop through vactl session until it is
    killed, and dies with the daemon (no reconnect): what a restart finds in flight."""
    extra = ["--arena", arena] if arena else []
    return subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess,sys\n"
         "p=subprocess.Popen(sys.argv[1:],stdin=subprocess.PIPE,stdout=subprocess.DEVNULL,"
         "text=True)\n"
         "try:\n"
         " for k in range(1000000):\n"
         "  p.stdin.write('alloc 8K\\nalloc 4K\\nshare #%d\\nfree #%d\\n'%(2*k+1,2*k+1))\n"
         "except BrokenPipeError: pass\n",
         VACTL, "--socket", sock, "--json", "session"] + extra,
        env=dict(os.environ, VAD_RECONNECT_MS="0"))


def wait_for(cond, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


class Session:
    """vactl session: ranges allocated through libvad; read and write go to the client's
    own mapping, so they work whatever the daemon is doing."""

    def __init__(self, sock, arena=None):
        # libvad reconnects and resumes (tests/run-tests turns that off for other tests).
        extra = ["--arena", arena] if arena else []
        self.p = subprocess.Popen([VACTL, "--socket", sock, "--json", "session"] + extra,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  bufsize=1, env=dict(os.environ, VAD_RECONNECT_MS="30000"))

    def run(self, lines):
        out = []
        for k in range(0, len(lines), 256):  # a chunk at a time: neither pipe fills up
            chunk = lines[k:k + 256]
            self.p.stdin.write("".join(line + "\n" for line in chunk))
            self.p.stdin.flush()
            out += [json.loads(self.p.stdout.readline()) for _ in chunk]
        return out

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        self.p.wait(timeout=30)


def write_all(s, tag, n=N):
    res = s.run(["write #%d %s-%d" % (i + 1, tag, i) for i in range(n)])
    return all(r.get("ok") for r in res)


def read_all(s, tag, n=N):
    res = s.run(["read #%d 32" % (i + 1) for i in range(n)])
    bad = [i for i, r in enumerate(res) if r.get("text") != "%s-%d" % (tag, i)]
    if bad:
        print("  first bad range #%d: %r" % (bad[0] + 1, res[bad[0]]), flush=True)
    return not bad


def error_of(r):
    """The error name of a failed session command (None if it succeeded)."""
    return None if r.get("ok") else r.get("error")


def listed_tokens(sock):
    """vactl tokens: {(arena, offset): row} of the live tokens this uid may see."""
    rc, out, err = vactl(sock, "tokens")
    if rc != 0:
        print("  vactl tokens: %s%s" % (out, err), flush=True)
        return {}
    return {(t["arena"], t["offset"]): t for t in json.loads(out)["tokens"]}


def attach_and_read(sock, tokens, texts, what):
    """A new client attaches each token and reads the text its range holds."""
    n = Session(sock)
    res = n.run(["attach " + t for t in tokens])
    ok = check(all(r.get("ok") for r in res), "%s: a new client attaches %d tokens: %s"
               % (what, len(tokens), [r for r in res if not r.get("ok")][:1]))
    if ok:
        got = n.run(["read #%d 32" % (i + 1) for i in range(len(tokens))])
        check([r.get("text") for r in got] == texts,
              "%s: and reads the data: %s" % (what, [r.get("text") for r in got]))
    n.close()


def start(m, argv, log):
    m.start(argv, log)
    return m.wait_ready(60)


def in_place(tmp, conf):
    """SIGUSR2 (and vactl restart) without a service manager: vad re-executes itself with
    the same fds, the same pid."""
    sock = os.path.join(tmp, "inplace.sock")
    log = os.path.join(tmp, "inplace.log")
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "LISTEN_FDS")}
    with open(log, "w") as err:
        d = subprocess.Popen([VAD, "--config", conf, "--socket", sock], env=env, stderr=err)
    check(wait_for(lambda: busy(sock) == 0, 30), "vad runs without a service manager")
    a = Session(sock)
    a.run(["alloc 4K"] * 2000)
    a.run(["write #%d P-%d" % (i + 1, i) for i in range(2000)])
    for how in ("SIGUSR2", "vactl restart"):
        with open(log) as f:
            seen = f.read().count("restored")
        if how == "SIGUSR2":
            d.send_signal(signal.SIGUSR2)
        else:
            rc, out, err = vactl(sock, "restart")
            check(rc == 0, "vactl restart is accepted: %s%s" % (out.strip(), err.strip()))

        def restored():
            with open(log) as f:
                return f.read().count("restored") > seen
        check(wait_for(restored, 30) and d.poll() is None,
              "%s: vad re-executes itself, same pid %d" % (how, d.pid))
        check(wait_for(lambda: busy(sock) == 2000 * Q, 30),
              "%s: the holds are back (busy %s)" % (how, busy(sock)))
        rc, out, err = vactl(sock, "check")
        check(rc == 0, "%s: vactl check passes" % how)
        res = a.run(["read #%d 32" % (i + 1) for i in range(2000)])
        check(all(r.get("text") == "P-%d" % i for i, r in enumerate(res)),
              "%s: the client's data is intact" % how)
    check(wait_for(lambda: busy(sock) == 0, 120), "after resume_grace the holds are dropped")
    d.send_signal(signal.SIGTERM)
    check(d.wait(timeout=60) == 0, "vad stops")
    a.p.kill()


def varint(n):
    out = b""
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, data):
    """A length-delimited protobuf field."""
    return varint(num << 3 | 2) + varint(len(data)) + data


def response_error(payload):
    """The error code (field 2) of an encoded vad.Response; 0 for OK."""
    i = 0
    while i < len(payload):
        key = 0
        shift = 0
        while True:
            b = payload[i]
            i += 1
            key |= (b & 0x7f) << shift
            shift += 7
            if not b & 0x80:
                break
        num, wt = key >> 3, key & 7
        val = 0
        shift = 0
        if wt == 0:
            while True:
                b = payload[i]
                i += 1
                val |= (b & 0x7f) << shift
                shift += 7
                if not b & 0x80:
                    break
            if num == 2:
                return val
        elif wt == 2:
            ln = 0
            shift = 0
            while True:
                b = payload[i]
                i += 1
                ln |= (b & 0x7f) << shift
                shift += 7
                if not b & 0x80:
                    break
            i += ln
        else:
            return None
    return 0


def raw_resume(sock, rid, secret):
    """Hello, then Resume(rid, secret) on a raw connection: the Resume reply's error code."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(sock)
    f = s.makefile("rb")

    def call(req):
        s.sendall(len(req).to_bytes(4, "little") + req)
        n = int.from_bytes(f.read(4), "little")
        return response_error(f.read(n))
    hello = varint(1 << 3) + varint(1) + field(2, field(1, b"guesser") + varint(2 << 3) + varint(1))
    if call(hello) != 0:
        return None
    resume = varint(1 << 3) + varint(2) + field(31, varint(1 << 3) + varint(rid) + field(2, secret))
    err = call(resume)
    s.close()
    return err


def resume_test(tmp):
    """A client carries on across a polite restart and a kill -9 under load: libvad
    reconnects and resumes its session; its old ranges free without ENOTHELD."""
    sock = os.path.join(tmp, "resume.sock")
    conf = os.path.join(tmp, "resume.conf")
    log = os.path.join(tmp, "resume.log")
    grace = "10s" if os.environ.get("VAD_TEST_MODE", "normal") == "normal" else "30s"
    with open(conf, "w") as f:
        f.write("[vad]\nresume_grace = %s\nstats_db = %s/resume-stats.db\nworkers = 2\n"
                "[arena default]\nsize = 256M\n" % (grace, tmp))
    argv = [VAD, "--config", conf, "--socket", sock]
    m = Manager(os.path.join(tmp, "resume-notify"))
    check(start(m, argv, log), "resume: vad starts")
    r = Session(sock)
    res = r.run(["alloc 4K"] * N)
    check(all(x.get("ok") for x in res), "resume: client R holds %d ranges" % N)
    check(write_all(r, "R1"), "resume: R writes every range")
    sh = r.run(["share #7", "share #8 once"])
    check(all(x.get("ok") for x in sh), "resume: R shares two ranges (plain, once)")
    rtok, ronce = [x.get("token", "") for x in sh]

    check(m.stop(signal.SIGTERM) == 0, "resume: polite stop")
    check(read_all(r, "R1") and write_all(r, "R2"), "resume: R reads and writes while vad is down")
    check(start(m, argv, log), "resume: vad comes back")
    errs = [raw_resume(sock, rid, bytes(16)) for rid in range(1, 33)]
    check(all(e == 29 for e in errs),
          "resume: a wrong secret is refused (ERESUME) for every session id 1..32: %s"
          % sorted(set(errs)))
    attach_and_read(sock, [rtok, ronce], ["R2-6", "R2-7"], "resume: after the polite restart")
    n = Session(sock)
    x = n.run(["attach " + ronce])[0]
    check(error_of(x) == "ETOKENUSED", "resume: the single-use token works once: %s"
          % error_of(x))
    n.close()
    res = r.run(["free #%d" % N])
    check(res[0].get("ok"), "resume: R's first call after the restart resumes transparently: %s"
          % res[0])
    check(busy(sock) == (N - 1) * Q, "resume: busy bytes = what R holds (%s)" % busy(sock))
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "resume: vactl check after the polite restart: %s" % out.strip())
    check(read_all(r, "R2", N - 1), "resume: R's data is intact")
    sh = r.run(["share #9"])
    check(sh[0].get("ok"), "resume: R shares one more range after resuming")
    rtok9 = sh[0].get("token", "")

    loader = start_loader(sock)
    time.sleep(random.uniform(0.2, 0.8))
    check(m.stop(signal.SIGKILL) == -9, "resume: kill -9 under load")
    check(read_all(r, "R2", N - 1) and write_all(r, "R3", N - 1),
          "resume: R reads and writes while vad is dead")
    check(start(m, argv, log), "resume: vad comes back after kill -9")
    attach_and_read(sock, [rtok9, rtok], ["R3-8", "R3-6"], "resume: after kill -9")
    res = r.run(["free #%d" % (N - 1)])
    check(res[0].get("ok"), "resume: R resumes after kill -9: %s" % res[0])
    loader.kill()
    loader.wait()
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "resume: vactl check after kill -9: %s" % out.strip())
    check(wait_for(lambda: busy(sock) == (N - 2) * Q, 120),
          "resume: after resume_grace the loader's ranges are back, R's stay (busy %s)"
          % busy(sock))
    check(read_all(r, "R3", N - 2), "resume: R's data is intact after kill -9")
    res = r.run(["free #%d" % (i + 1) for i in range(N - 2)])
    bad = [x for x in res if not x.get("ok")]
    check(not bad, "resume: R frees its old pointers after resuming, no ENOTHELD (%d failed%s)"
          % (len(bad), ": %s" % bad[0] if bad else ""))
    check(busy(sock) == 0, "resume: nothing busy after R freed all (%s)" % busy(sock))
    n = Session(sock)
    x = n.run(["attach " + rtok])[0]
    check(error_of(x) == "ETOKEN", "resume: R's token went with its range: %s" % error_of(x))
    n.close()
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "resume: vactl check at the end: %s" % out.strip())
    r.close()
    m.stop(signal.SIGTERM)


def tenant_test(tmp):
    """A tenant arena (tenancy = uid) is kept like any: its file stored as arena.own@UID when
    it opens, its ranges and tokens restored across a polite restart and a kill -9 under load
    in it, and its file dropped from the store once it closes."""
    sock = os.path.join(tmp, "tenant.sock")
    conf = os.path.join(tmp, "tenant.conf")
    log = os.path.join(tmp, "tenant.log")
    grace = "10s" if os.environ.get("VAD_TEST_MODE", "normal") == "normal" else "30s"
    with open(conf, "w") as f:
        f.write("[vad]\nresume_grace = %s\nstats_db = %s/tenant-stats.db\nworkers = 2\n"
                "[arena default]\nsize = 64M\n"
                "[arena own]\nsize = 64M\ntenancy = uid\ntenant_idle = 1s\n" % (grace, tmp))
    argv = [VAD, "--config", conf, "--socket", sock]
    name = "arena.own@%d" % os.getuid()
    m = Manager(os.path.join(tmp, "tenant-notify"))
    check(start(m, argv, log), "tenant: vad starts")
    check(name not in m.names(), "tenant: no tenant arena is stored before one opens")
    T = 2000
    t = Session(sock, "own")
    res = t.run(["alloc 4K"] * T)
    check(all(x.get("ok") for x in res), "tenant: client T holds %d ranges in its own arena" % T)
    check(wait_for(lambda: name in m.names(), 30),
          "tenant: its arena is stored when it opens: %s" % m.names())
    check(write_all(t, "T1", T), "tenant: T writes every range")
    sh = t.run(["share #1", "share #2 once"])
    check(all(x.get("ok") for x in sh), "tenant: T shares two of them")
    tok, once = [x.get("token", "") for x in sh]

    check(m.stop(signal.SIGTERM) == 0, "tenant: polite stop")
    check(read_all(t, "T1", T) and write_all(t, "T2", T), "tenant: T reads and writes while down")
    stored = sorted(m.names())
    conf2 = os.path.join(tmp, "tenant-resized.conf")
    with open(conf) as f:
        text = f.read()
    with open(conf2, "w") as f:
        f.write(text.replace("[arena own]\nsize = 64M", "[arena own]\nsize = 128M"))
    m.start([VAD, "--config", conf2, "--socket", sock], log)
    code = m.wait_exit(60)
    with open(log) as f:
        last = f.read().splitlines()[-1]
    check(code == 3 and "own@" in last and "cannot change across a restart" in last,
          "tenant: a resized tenant section is refused: %s" % last)
    check(sorted(m.names()) == stored, "tenant: nothing left the store")
    check(start(m, argv, log), "tenant: vad comes back")
    check(name in m.names(), "tenant: the tenant arena stays stored")
    check(busy(sock) == T * Q, "tenant: its ranges are busy again (%s)" % busy(sock))
    attach_and_read(sock, [tok, once], ["T2-0", "T2-1"], "tenant: after the polite restart")
    res = t.run(["free #%d" % T])
    check(res[0].get("ok"), "tenant: T resumes: %s" % res[0])
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "tenant: vactl check after the polite restart: %s" % out.strip())
    check(read_all(t, "T2", T - 1), "tenant: T's data is intact")

    loader = start_loader(sock, "own")
    time.sleep(random.uniform(0.2, 0.8))
    check(m.stop(signal.SIGKILL) == -9, "tenant: kill -9 under load in the tenant arena")
    check(read_all(t, "T2", T - 1) and write_all(t, "T3", T - 1),
          "tenant: T reads and writes while vad is dead")
    check(start(m, argv, log), "tenant: vad comes back after kill -9")
    attach_and_read(sock, [tok], ["T3-0"], "tenant: after kill -9")
    res = t.run(["free #%d" % (T - 1)])
    check(res[0].get("ok"), "tenant: T resumes after kill -9: %s" % res[0])
    loader.kill()
    loader.wait()
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "tenant: vactl check after kill -9: %s" % out.strip())
    check(wait_for(lambda: busy(sock) == (T - 2) * Q, 120),
          "tenant: after resume_grace the loader's ranges are back, T's stay (busy %s)"
          % busy(sock))
    check(read_all(t, "T3", T - 2), "tenant: T's data is intact after kill -9")
    res = t.run(["free #%d" % (i + 1) for i in range(T - 2)])
    check(all(x.get("ok") for x in res), "tenant: T frees its old pointers")
    t.close()
    check(busy(sock) == 0, "tenant: nothing busy (%s)" % busy(sock))
    check(wait_for(lambda: name not in m.names(), 60),
          "tenant: once idle the tenant arena closes and leaves the store: %s" % m.names())
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "tenant: vactl check at the end: %s" % out.strip())
    m.stop(signal.SIGTERM)

    # The store full ($FDSTORE=3: the default arena and two state files): the tenant arena is
    # not stored, the daemon says why, and a restart starts without it instead of refusing.
    m = Manager(os.path.join(tmp, "full-notify"))
    argv = [VAD, "--config", conf, "--socket", sock, "--discard-state"]
    m.start(argv, log, extra_env={"FDSTORE": "3"})
    check(m.wait_ready(60), "full: vad starts with FDSTORE=3")
    t = Session(sock, "own")
    res = t.run(["alloc 4K"] * 10 + ["write #1 kept?"])
    check(all(x.get("ok") for x in res), "full: T allocates in its tenant arena anyway")

    def said_full():
        with open(log) as f:
            return "fd store is full (FileDescriptorStoreMax=3): %s is not stored" % name \
                in f.read()
    check(wait_for(said_full, 30), "full: the daemon logs that the store is full")
    check(name not in m.names(), "full: the tenant arena is not stored: %s" % m.names())
    check(m.stop(signal.SIGTERM) == 0, "full: polite stop")
    m.start(argv[:-1], log, extra_env={"FDSTORE": "3"})
    check(m.wait_ready(60), "full: the next start is not refused")
    check(busy(sock) == 0, "full: it begins the tenant arena empty (busy %s)" % busy(sock))
    check(sorted(m.names()) == ["arena.default", "state.2"],
          "full: the store holds the arena and the new state file: %s" % m.names())
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "full: vactl check: %s" % out.strip())
    t.p.kill()
    m.stop(signal.SIGTERM)


def main():
    tmp = tempfile.mkdtemp(prefix="vad-restart.")
    sock = os.path.join(tmp, "vad.sock")
    conf = os.path.join(tmp, "vad.conf")
    log = os.path.join(tmp, "vad.log")
    with open(conf, "w") as f:
        # Long enough for the slowest sanitizer between a restart and the checks after it.
        # A does not call the daemon after the kill -9 (nothing resumes its session), yet the
        # checks that no range went to two holders need its holds kept until they are done:
        # a grace no loaded machine runs through first.
        grace = "30s"
        f.write("[vad]\nresume_grace = %s\nstats_db = %s/stats.db\nworkers = 2\n"
                "[arena default]\nsize = 256M\n" % (grace, tmp))
    argv = [VAD, "--config", conf, "--socket", sock]
    m = Manager(os.path.join(tmp, "notify"))

    check(start(m, argv, log), "vad starts under the fd store stand-in")
    check("arena.default" in m.names() and "state.1" in m.names(),
          "it stores its arena and its state file: %s" % m.names())

    a = Session(sock)
    res = a.run(["alloc 4K"] * N)
    check(all(r.get("ok") for r in res), "client A holds %d ranges" % N)
    check(write_all(a, "A1"), "A writes every range")
    before = busy(sock)
    check(before == N * Q, "busy bytes %s = what A holds" % before)
    # A hostile client sharing in a loop cannot grow the state file: token records are
    # reused (the header's token high-water mark, at byte 56, counts the slots ever used).
    h = Session(sock)
    h.run(["alloc 4K"] + ["share #1 once", "share #1", "unshare #1"] * 1000)
    h.close()
    hw = int.from_bytes(os.pread(m.fd_of("state.1"), 8, 56), "little")
    check(hw <= 2, "3000 shares and revokes used %d token records of the state file" % hw)
    sh = a.run(["share #1", "share #2 once", "share #3 ttl 1s", "share #5 ttl 1h"])
    check(all(r.get("ok") for r in sh), "A shares 4 ranges (plain, once, ttl 1s, ttl 1h)")
    plain, once, short, long_ = [r.get("token", "") for r in sh]
    short_expires = time.monotonic() + 1.0
    offs = {i: res[i - 1]["offset"] for i in (1, 2, 3, 5, 6)}

    # --- polite restart
    code = m.stop(signal.SIGTERM)
    check(code == 0, "SIGTERM stops vad (exit %s)" % code)
    check(read_all(a, "A1") and write_all(a, "A2"), "A reads and writes its memory while vad is down")
    check("arena.default" in m.names() and "state.1" in m.names(), "the fds stay stored")
    # The 1 s token expires while vad is down: the next one must not bring it back.
    wait_for(lambda: time.monotonic() > short_expires + 0.1, 30)
    t0 = time.monotonic()
    check(start(m, argv, log), "vad comes back with the stored fds (READY in %.0f ms)"
          % ((time.monotonic() - t0) * 1000))
    # First the tokens: A does not resume here, so its holds last resume_grace.
    toks = listed_tokens(sock)
    check(all(("default", offs[i]) in toks for i in (1, 2, 5))
          and ("default", offs[3]) not in toks,
          "vactl tokens lists the restored tokens, not the expired one: %s" % sorted(toks))
    t5 = toks.get(("default", offs[5]), {})
    check(toks.get(("default", offs[2]), {}).get("single_use") is True
          and 3000 * 1000 < (t5.get("ttl_left_ms") or 0) <= 3600 * 1000,
          "with their terms (single use; %s ms left of 1 h)" % t5.get("ttl_left_ms"))
    attach_and_read(sock, [plain, once, long_], ["A2-0", "A2-1", "A2-4"],
                    "after the polite restart")
    n = Session(sock)
    r1 = n.run(["attach " + once])[0]
    check(error_of(r1) == "ETOKENUSED", "the single-use token works once: %s" % error_of(r1))
    r1 = n.run(["attach " + short])[0]
    check(error_of(r1) == "EEXPIRED",
          "the 1 s token that expired during the restart is refused as expired: %s"
          % error_of(r1))
    n.close()
    check("state.2" in m.names() and "state.1" not in m.names(),
          "the new state file is stored, the old one removed: %s" % m.names())
    check(busy(sock) == before, "busy bytes after the polite restart: %s" % busy(sock))
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "vactl check after the polite restart: %s" % out.strip())
    check(read_all(a, "A2"), "A's data is intact")

    b = Session(sock)
    res = b.run(["alloc 4K"] * 5000)
    check(all(r.get("ok") for r in res), "client B gets 5000 ranges")
    res = b.run(["read #%d 4K" % (i + 1) for i in range(5000)])
    check(all(r.get("zero") for r in res), "B's ranges read as zeros")
    b.run(["write #%d B-%d" % (i + 1, i) for i in range(5000)])
    check(read_all(a, "A2"), "A's data survives B's writes: no range was handed out twice")
    b.close()

    sh = a.run(["share #6"])
    check(sh[0].get("ok"), "A shares one more range before the kill -9")
    tok6 = sh[0].get("token", "")

    # --- kill -9 during a busy load
    loader = start_loader(sock)
    time.sleep(random.uniform(0.2, 0.8))
    code = m.stop(signal.SIGKILL)
    check(code == -9, "kill -9 at a random moment of the load (exit %s)" % code)
    check(read_all(a, "A2") and write_all(a, "A3"), "A reads and writes while vad is dead")
    check(start(m, argv, log), "vad comes back after kill -9")
    attach_and_read(sock, [tok6, plain], ["A3-5", "A3-0"], "after kill -9")
    toks = listed_tokens(sock)
    check(("default", offs[6]) in toks and ("default", offs[1]) in toks,
          "vactl tokens lists them after kill -9")
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "vactl check after kill -9: %s" % out.strip())
    after = busy(sock)
    check(after is not None and after >= N * Q, "A's ranges are still busy (%s bytes)" % after)
    check(read_all(a, "A3"), "A's data is intact after kill -9")
    loader.kill()
    loader.wait()
    b = Session(sock)
    res = b.run(["alloc 4K"] * 5000)
    res = b.run(["read #%d 4K" % (i + 1) for i in range(5000)])
    check(all(r.get("zero") for r in res), "fresh ranges read as zeros after the crash")
    b.run(["write #%d B-%d" % (i + 1, i) for i in range(5000)])
    check(read_all(a, "A3"), "A's data survives a new client's writes after the crash")
    b.close()
    # Nobody resumes A's session (libvad does not reconnect yet): after resume_grace its
    # holds go, like the loader's.
    cpu0, wall0 = cpu_seconds(m.pid), time.monotonic()
    check(wait_for(lambda: busy(sock) == 0, 120),
          "every hold of the previous daemon's sessions is dropped after resume_grace "
          "(busy %s)" % busy(sock))
    cpu, wall = cpu_seconds(m.pid) - cpu0, time.monotonic() - wall0
    # Load only lowers this share; a thread spinning through the grace makes it about 1.
    check(cpu < 0.5 * wall, "vad idles through the grace: %.2f s of CPU in %.1f s" % (cpu, wall))
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "vactl check after the grace: %s" % out.strip())
    n = Session(sock)
    r1 = n.run(["attach " + plain, "attach " + tok6])
    check([error_of(x) for x in r1] == ["ETOKEN", "ETOKEN"],
          "the tokens went with their ranges' holders: %s" % [error_of(x) for x in r1])
    n.close()
    check(listed_tokens(sock) == {}, "vactl tokens lists none")

    # --- refusals: keep something in the state, then damage it
    c = Session(sock)
    c.run(["alloc 4K"] * 100)
    code = m.stop(signal.SIGTERM)
    c.close()
    stored = sorted(m.names())
    state = [n for n in stored if n.startswith("state.")][0]
    # An arena whose size changed in the config cannot take its stored file back.
    conf2 = os.path.join(tmp, "resized.conf")
    with open(conf) as f:
        text = f.read()
    with open(conf2, "w") as f:
        f.write(text.replace("size = 256M", "size = 512M"))
    m.start([VAD, "--config", conf2, "--socket", sock], log)
    code = m.wait_exit(60)
    with open(log) as f:
        last = f.read().splitlines()[-1]
    check(code == 3 and "cannot change across a restart" in last,
          "a resized arena is refused: %s" % last)
    check(sorted(m.names()) == stored, "nothing left the store")
    fd = m.fd_of(state)
    # Damage the offset of a live record (its head word says valid), as a stray write would.
    hdr = int.from_bytes(os.pread(fd, 4, 12), "little")  # header_size
    high = int.from_bytes(os.pread(fd, 8, 32), "little")  # slots used
    recs = os.pread(fd, 32 * high, hdr)
    # Hold records: valid, and an arena field (bytes 4-5) that is not 0xffff (a session's).
    live = [i for i in range(high) if recs[32 * i + 7] & 0x80
            and recs[32 * i + 4:32 * i + 6] != b"\xff\xff"]
    check(len(live) == 100, "the state file holds the 100 live holds (%d)" % len(live))
    victim = random.choice(live)
    os.pwrite(fd, bytes(random.randrange(256) for _ in range(8)), hdr + 32 * victim + 8)
    m.start(argv, log)
    code = m.wait_exit(60)
    with open(log) as f:
        text = f.read()
    check(code == 3, "a corrupted state file is refused (exit %s)" % code)
    check("refusing to start" in text.splitlines()[-1] and "corrupted" in text.splitlines()[-1],
          "with a sentence: %s" % text.splitlines()[-1])
    check(sorted(m.names()) == stored and not m.ready, "nothing left the store: %s" % m.names())

    short = os.memfd_create("short")
    os.write(short, os.pread(fd, 100, 0))
    m.replace_fd(state, short)
    m.start(argv, log)
    code = m.wait_exit(60)
    with open(log) as f:
        last = f.read().splitlines()[-1]
    check(code == 3 and "truncated" in last, "a truncated state file is refused: %s" % last)
    check(sorted(m.names()) == stored, "nothing left the store")

    check(start(m, argv + ["--discard-state"], log), "--discard-state starts anyway")
    check(busy(sock) == 0 and state not in m.names(),
          "empty, the old state dropped from the store: %s" % m.names())
    rc, out, err = vactl(sock, "check")
    check(rc == 0, "vactl check after --discard-state")
    # Socket activation and the fd store together (vad.socket + vad.service): the socket
    # comes first in LISTEN_FDS, the stored files after it.
    c = Session(sock)
    c.run(["alloc 4K"] * 10)
    m.stop(signal.SIGTERM)
    c.close()
    act = os.path.join(tmp, "activated.sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(act)
    ls.listen(16)
    m.start(argv, log, sockets=[["vad.socket", ls.fileno()]])
    check(m.wait_ready(60), "vad starts with an activated socket and the stored fds")
    check(busy(act) == 10 * Q, "it listens on the activated socket and has the 10 ranges "
          "back (busy %s)" % busy(act))
    check(m.stop(signal.SIGTERM) == 0, "and stops")
    ls.close()
    a.p.kill()
    in_place(tmp, conf)
    resume_test(tmp)
    tenant_test(tmp)
    print("test_restart: %d passed, %d failed" % (passed, failed), flush=True)
    if failed:
        with open(log) as f:
            sys.stdout.write(f.read()[-4000:])
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
