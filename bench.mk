# bench.mk - `make bench-daemon`: vad through its socket, side by side with Redis SET and a
# socketpair echo, with the bars of the speed issue (tests/bench/bench-daemon --help).
# Included from the Makefile; uses its O, VAD, VACTL and VABENCH.
#   make bench-daemon                          the full run (about 2-3 minutes)
#   make bench-daemon BENCH_DAEMON_ARGS=--quick  a short smoke run
BENCH_DAEMON_ARGS ?=

.PHONY: bench-daemon
bench-daemon: $(VAD) $(VACTL) $(VABENCH)
	tests/bench/bench-daemon $(O) $(BENCH_DAEMON_ARGS)
