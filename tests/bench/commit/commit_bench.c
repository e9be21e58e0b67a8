/*
 * commit_bench.c - what commit = reserve costs per range against commit = touch: one daemon
 * with a touch and a reserve arena of each kind (memfd; hugetlb 2 MiB when huge pages can be
 * reserved, as root), one client, rounds interleaved so both see the same machine. Per size
 * it prints the median of two loops, in microseconds per range:
 *   alloc+free          the request's cost alone (reserve commits, touch does nothing)
 *   alloc+write+free    the range used: every page written once (touch faults them in)
 * Run: make bench-commit (or VAD_BUILD_DIR=build build/bench/commit_bench [ROUNDS]).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MiB	 (1024ull * 1024ull)
#define HUGE_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB/"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* ns per range of n alloc(+write)+free cycles of size in arena; 0 on failure. */
static uint64_t loop(vad_client *c, const char *arena, size_t size, int n, bool write)
{
	uint64_t t0 = vt_now_ns();
	for (int i = 0; i < n; i++) {
		void *p;
		if (vad_alloc_in(c, arena, size, 0, &p) != 0) {
			fprintf(stderr, "alloc %zu in %s: %s\n", size, arena, vad_last_error(c));
			return 0;
		}
		if (write)
			for (size_t off = 0; off < size; off += 4096)
				((volatile char *)p)[off] = 1;
		vad_free(c, p);
	}
	return (vt_now_ns() - t0) / (uint64_t)n;
}

static long read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static void write_long(const char *path, long v)
{
	FILE *f = fopen(path, "we");
	if (f) {
		fprintf(f, "%ld\n", v);
		fclose(f);
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rounds = argc > 1 ? atoi(argv[1]) : 15;
	if (rounds < 1)
		rounds = 1;
	long huge_before = vt_is_root() ? read_long(HUGE_DIR "nr_hugepages") : -1;
	bool huge = false;
	if (huge_before >= 0) {
		write_long(HUGE_DIR "nr_hugepages", huge_before + 8);
		huge =
		    read_long(HUGE_DIR "free_hugepages") - read_long(HUGE_DIR "resv_hugepages") >=
		    8;
	}
	const char *huge_sections = "[arena htouch]\nsize = 64M\nbacking = hugetlb:2M\n"
				    "[arena hreserve]\nsize = 64M\nbacking = hugetlb:2M\n"
				    "commit = reserve\n";
	char sections[1024];
	snprintf(sections, sizeof(sections),
		 "[arena touch]\nsize = 1G\n[arena reserve]\nsize = 1G\ncommit = reserve\n%s",
		 huge ? huge_sections : "");
	struct vt_daemon d;
	vad_client *c;
	if (vt_daemon_setup(&d, "workers = 1\n", sections) || vt_connect(&d, "bench", &c)) {
		if (huge_before >= 0)
			write_long(HUGE_DIR "nr_hugepages", huge_before);
		return 1;
	}
	static const struct {
		size_t size;
		int n;
		bool huge;
	} cases[] = {
	    {4096, 2000, false},
	    {64 * 1024, 1000, false},
	    {1 * MiB, 200, false},
	    {2 * MiB, 100, true},
	};
	printf("commit = reserve against touch, median of %d interleaved rounds, us per range\n",
	       rounds);
	printf("%-12s %-8s %12s %12s %18s %18s\n", "size", "backing", "touch a+f", "reserve a+f",
	       "touch a+write+f", "reserve a+write+f");
	int rc = 0;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		if (cases[k].huge && !huge) {
			printf("%-12s %-8s skipped: no 2 MiB huge pages could be reserved\n",
			       "2 MiB", "hugetlb");
			continue;
		}
		const char *arena[2] = {cases[k].huge ? "htouch" : "touch",
					cases[k].huge ? "hreserve" : "reserve"};
		uint64_t *v[4];
		for (int j = 0; j < 4; j++)
			v[j] = calloc((size_t)rounds, sizeof(uint64_t));
		/* hugetlb with touch: a freed range keeps its written huge pages until the lazy
		 * release, so writing would empty the pool and SIGBUS this process (which is
		 * what commit = reserve is for); only the request is timed there */
		int loops = cases[k].huge ? 2 : 4;
		for (int r = 0; r < rounds; r++)
			for (int j = 0; j < 4; j++) {
				if (j >= loops) {
					v[j][r] = 0;
					continue;
				}
				v[j][r] = loop(c, arena[j % 2], cases[k].size, cases[k].n, j >= 2);
				if (!v[j][r])
					rc = 1;
			}
		double med[4];
		for (int j = 0; j < 4; j++) {
			qsort(v[j], (size_t)rounds, sizeof(uint64_t), cmp_u64);
			med[j] = (double)v[j][rounds / 2] / 1000.0;
			free(v[j]);
		}
		char sz[32];
		snprintf(sz, sizeof(sz), "%zu KiB", cases[k].size / 1024);
		if (cases[k].huge)
			printf("%-12s %-8s %12.2f %12.2f %18s %18s\n", sz, "hugetlb", med[0],
			       med[1], "(would SIGBUS)", "-");
		else
			printf("%-12s %-8s %12.2f %12.2f %18.2f %18.2f\n", sz, "memfd", med[0],
			       med[1], med[2], med[3]);
	}
	vad_close(c);
	vt_daemon_stop(&d);
	vt_daemon_destroy(&d);
	if (huge_before >= 0)
		write_long(HUGE_DIR "nr_hugepages", huge_before);
	return rc;
}
