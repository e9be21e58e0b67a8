# bench.mk - `make bench-daemon`: vad through its socket, side by side with Redis SET and a
# socketpair echo, each figure against its pass/fail bar (tests/bench/bench-daemon --help).
# Included from the Makefile; uses its O, VAD, VACTL and VABENCH.
#   make bench-daemon                          the full run (about 2-3 minutes)
#   make bench-daemon BENCH_DAEMON_ARGS=--quick  a short smoke run
BENCH_DAEMON_ARGS ?=

.PHONY: bench-daemon
bench-daemon: $(VAD) $(VACTL) $(VABENCH)
	tests/bench/bench-daemon $(O) $(BENCH_DAEMON_ARGS)

# `make bench-registry`: what one client's teardown costs the others (B's worst and p99
# alloc+free round trip while A's 100k/1M/4M ranges come back) and the daemon's bytes per
# live range (tests/bench/registry/registry_bench.c). REGISTRY_BENCH_ARGS picks the runs.
REGISTRY_BENCH := $(O)/bench/registry_bench
$(REGISTRY_BENCH): tests/bench/registry/registry_bench.c $(LIBTEST) $(LIBDAEMON) $(LIBVAD_A) $(LIBPROTO) $(LIBVASPACE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/common $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_LINK)

.PHONY: bench-registry
bench-registry: $(VAD) $(REGISTRY_BENCH)
	VAD_BUILD_DIR=$(O) $(REGISTRY_BENCH) teardown $(REGISTRY_BENCH_ARGS)
	VAD_BUILD_DIR=$(O) $(REGISTRY_BENCH) memory

# `make bench-commit`: what commit = reserve costs per range (4 KiB, 64 KiB, 1 MiB memfd; 2 MiB
# hugetlb as root) against commit = touch, with and without writing the range
# (tests/bench/commit/commit_bench.c). COMMIT_BENCH_ARGS: the number of rounds.
COMMIT_BENCH := $(O)/bench/commit_bench
$(COMMIT_BENCH): tests/bench/commit/commit_bench.c $(LIBTEST) $(LIBDAEMON) $(LIBVAD_A) $(LIBPROTO) $(LIBVASPACE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/common $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_LINK)

.PHONY: bench-commit
bench-commit: $(VAD) $(COMMIT_BENCH)
	VAD_BUILD_DIR=$(O) $(COMMIT_BENCH) $(COMMIT_BENCH_ARGS)

# `make bench-restart`: a restart with 1M live ranges under a stand-in for systemd's fd store,
# politely (SIGTERM) and after a kill -9, stop to READY split into the daemon's phases, and
# the state file's bytes per live range (tests/bench/restart/). RESTART_BENCH_ARGS: --ranges N,
# --clients C, --runs R, --shares S, --workers W.
RESTART_BENCH := $(O)/bench/restart_bench
RESTART_BENCH_SRC := tests/bench/restart/restart_bench.c tests/bench/restart/fdstore_standin.c
$(RESTART_BENCH): $(RESTART_BENCH_SRC) tests/bench/restart/fdstore_standin.h $(LIBTEST) $(LIBDAEMON) $(LIBVAD_A) $(LIBPROTO) $(LIBVASPACE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/common $(CFLAGS) $(LDFLAGS) -o $@ $(RESTART_BENCH_SRC) $(TEST_LINK)

.PHONY: bench-restart
bench-restart: $(VAD) $(RESTART_BENCH)
	VAD_BUILD_DIR=$(O) $(RESTART_BENCH) $(RESTART_BENCH_ARGS)
