/*
 * registry_bench - what the daemon's registry costs (run by `make bench-registry`):
 *   teardown [N...]  client A holds N single-page ranges and goes away (close, SIGKILL,
 *                    dropped by the daemon); client B on the same worker loops alloc+free:
 *                    B's worst and p99 round trip, and how long until A's ranges are back
 *                    (default N: 0 100000 1000000 4000000; 0 is B alone for a second, the
 *                    machine's own noise)
 *   memory [N]       the daemon's RSS (VmRSS of /proc/PID/status) before and after a
 *                    client allocates N single-page ranges (default 1000000): bytes per range
 * Options: --old  leave out the config keys of the range limits (to time an older daemon:
 *                 VAD_BUILD_DIR names the build directory holding vad);
 *          --how close|kill|drop  time that teardown alone.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rawclient.h"
#include "teardown.h"

static bool old_daemon;
static int only_how = -1; /* --how close|kill|drop: that one alone */

static int start(struct vt_daemon *d, uint64_t n)
{
	char vad[512], arena[128];
	/* One worker: A and B share it, the case where a synchronous teardown stalls B. */
	snprintf(vad, sizeof(vad), "workers = 1\nworker_balance = even\nlog_level = notice\n%s",
		 old_daemon ? "" : "max_ranges_client = unlimited\nmax_ranges_uid = unlimited\n");
	snprintf(arena, sizeof(arena), "[arena default]\nsize = %" PRIu64 "M\n",
		 (n * 4096 >> 20) + 256);
	return vt_daemon_setup(d, vad, arena);
}

static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	long kib = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static int bench_teardown(int n_sizes, uint64_t *sizes)
{
	printf("%-10s %-6s %8s %10s %10s %12s\n", "ranges", "how", "rounds", "B max ms", "B p99 ms",
	       "back in ms");
	for (int i = 0; i < n_sizes; i++) {
		for (int how = VT_TEARDOWN_CLOSE; how <= VT_TEARDOWN_DROP; how++) {
			if ((only_how >= 0 && how != only_how) || (sizes[i] == 0 && how > 0))
				continue;
			struct vt_daemon d;
			if (start(&d, sizes[i]) != 0)
				return 1;
			struct vt_teardown_result r;
			int rc = vt_teardown_run(&d, sizes[i], how, false, 600000, &r);
			if (rc == 0)
				printf("%-10" PRIu64 " %-6s %8" PRIu64
				       " %10.2f %10.2f %12.1f %12.1f\n",
				       sizes[i], vt_teardown_name(how), r.rounds, r.max_ns / 1e6,
				       r.p99_ns / 1e6, r.back_ns / 1e6, r.max_at_ns / 1e6);
			fflush(stdout);
			if (vt_daemon_stop(&d) != 0)
				rc = -1;
			vt_daemon_destroy(&d);
			if (rc != 0)
				return 1;
		}
	}
	return 0;
}

static int bench_memory(uint64_t n)
{
	struct vt_daemon d;
	if (start(&d, n) != 0)
		return 1;
	struct vt_raw r;
	int rc = 1;
	uint64_t off;
	/* Warm up: the worker, its session and scratch buffers exist before the first figure. */
	if (vt_raw_connect(&r, d.socket_path) != 0 || vt_raw_hello(&r, "memory") != 0 ||
	    vt_raw_alloc(&r, 4096, &off) != 0 || vt_raw_free(&r, off) != 0)
		goto out;
	long before = rss_kib(d.pid);
	if (vt_raw_alloc_many(&r, n, 1024) != 0)
		goto out;
	long after = rss_kib(d.pid);
	printf("daemon VmRSS %ld KiB before, %ld KiB with %" PRIu64
	       " single-page ranges: %.1f bytes per range\n",
	       before, after, n, (double)(after - before) * 1024.0 / (double)n);
	rc = 0;
out:
	vt_raw_close(&r);
	if (vt_daemon_stop(&d) != 0)
		rc = 1;
	vt_daemon_destroy(&d);
	return rc;
}

int main(int argc, char **argv)
{
	int a = 1;
	if (a < argc && strcmp(argv[a], "--old") == 0) {
		old_daemon = true;
		a++;
	}
	if (a + 1 < argc && strcmp(argv[a], "--how") == 0) {
		for (int h = VT_TEARDOWN_CLOSE; h <= VT_TEARDOWN_DROP; h++)
			if (strcmp(argv[a + 1], vt_teardown_name(h)) == 0)
				only_how = h;
		a += 2;
	}
	if (a >= argc) {
		fprintf(stderr,
			"usage: registry_bench [--old] [--how close|kill|drop] teardown [N...] | "
			"memory [N]\n");
		return 2;
	}
	const char *mode = argv[a++];
	uint64_t sizes[16];
	int n = 0;
	for (; a < argc && n < 16; a++)
		sizes[n++] = strtoull(argv[a], NULL, 10);
	if (strcmp(mode, "teardown") == 0) {
		if (n == 0) {
			sizes[0] = 0; /* B alone: the machine's own noise */
			sizes[1] = 100000;
			sizes[2] = 1000000;
			sizes[3] = 4000000;
			n = 4;
		}
		return bench_teardown(n, sizes);
	}
	if (strcmp(mode, "memory") == 0)
		return bench_memory(n ? sizes[0] : 1000000);
	fprintf(stderr, "registry_bench: unknown mode '%s'\n", mode);
	return 2;
}
