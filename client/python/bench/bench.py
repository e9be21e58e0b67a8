"""bench.py BUILD_DIR - the Python binding's single-threaded alloc+free round trip against
libvad's own (bench_roundtrip, a C program linked with the same libvad.so), measured in
turns against one daemon of the build tree, so both see the same machine load. Prints
each round, the medians and their ratio (target: Python <= 1.3 x C).

Environment: BENCH_ROUNDS (15), BENCH_ITERATIONS (5000), BENCH_SIZE (4096).
"""

import os
import statistics
import subprocess
import sys
import time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
sys.path.insert(0, os.path.join(build, "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "python"))

import vad  # noqa: E402
from conftest import Daemon  # noqa: E402  (starts a daemon as the tests do)

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))
N = int(os.environ.get("BENCH_ITERATIONS", "5000"))
SIZE = int(os.environ.get("BENCH_SIZE", "4096"))
TARGET = 1.3


def python_round(client):
    """Mean ns of one alloc+free from Python (after a warm-up)."""
    alloc = client.alloc
    for _ in range(N // 10 + 1):
        alloc(SIZE).free()
    t0 = time.perf_counter_ns()
    for _ in range(N):
        alloc(SIZE).free()
    return (time.perf_counter_ns() - t0) / N


def c_round(sock):
    """Mean ns of one alloc+free from C, in its own process."""
    out = subprocess.run([os.path.join(build, "python", "bench_roundtrip"), sock, str(N),
                          str(SIZE)], check=True, capture_output=True, text=True).stdout
    return float(out)


def main():
    d = Daemon().start()
    try:
        with vad.Client(d.socket, name="bench-python") as client:
            py, c = [], []
            print(f"alloc+free round trip of {SIZE} bytes, {N} per round, {ROUNDS} rounds "
                  f"(C and Python in turns, one daemon)")
            for i in range(ROUNDS):
                c.append(c_round(d.socket))
                py.append(python_round(client))
                print(f"  round {i + 1}: C {c[-1] / 1000:7.2f} us   Python {py[-1] / 1000:7.2f} us"
                      f"   ratio {py[-1] / c[-1]:.3f}")
        cm, pm = statistics.median(c), statistics.median(py)
        ratio = pm / cm
        verdict = "ok" if ratio <= TARGET else "ABOVE TARGET"
        per_round = statistics.median(p / q for p, q in zip(py, c))
        print(f"median: C {cm / 1000:.2f} us, Python {pm / 1000:.2f} us per alloc+free; "
              f"Python/C = {ratio:.3f}x (median of the rounds' ratios {per_round:.3f}x; "
              f"target <= {TARGET}x: {verdict})")
    finally:
        d.stop()
        d.destroy()


if __name__ == "__main__":
    main()
