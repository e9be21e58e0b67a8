/*
 * bench_roundtrip.c - libvad's single-threaded alloc+free round trip, the reference the
 * Python binding is measured against (bench.py runs the two in turns).
 *   bench_roundtrip SOCKET ITERATIONS SIZE   prints the mean ns per alloc+free
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vad.h"

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* n alloc+free round trips of size bytes; 0, or the failing VAD_E* code. */
static int roundtrips(vad_client *c, long n, size_t size)
{
	for (long i = 0; i < n; i++) {
		void *p;
		int err = vad_alloc(c, size, 0, &p);
		if (err == VAD_OK)
			err = vad_free(c, p);
		if (err != VAD_OK)
			return err;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s SOCKET ITERATIONS SIZE\n", argv[0]);
		return 2;
	}
	long n = atol(argv[2]);
	size_t size = (size_t)atol(argv[3]);
	vad_client *c;
	int err = vad_connect(argv[1], "bench-c", &c);
	if (err != VAD_OK) {
		fprintf(stderr, "bench_roundtrip: %s\n", vad_last_error(NULL));
		return 1;
	}
	err = roundtrips(c, n / 10 + 1, size); /* warm up: mapping, pools */
	double t0 = now_ns();
	if (err == VAD_OK)
		err = roundtrips(c, n, size);
	double t1 = now_ns();
	if (err != VAD_OK) {
		fprintf(stderr, "bench_roundtrip: %s\n", vad_last_error(c));
		vad_close(c);
		return 1;
	}
	printf("%.0f\n", (t1 - t0) / (double)n);
	vad_close(c);
	return 0;
}
