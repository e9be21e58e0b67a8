/*
 * pkg_client.c - an external libvad program for tests/integration/test_packaging*.sh, which
 * compile it against an installed libvad (pkg-config) rather than the build tree; the
 * Makefile does not build it. With a socket path: connect, allocate 1 MiB, check it reads
 * zeros, write it, free it, close. With --version: print the header's version and one
 * vad_strerror sentence (proves the library loads without a daemon).
 */
#include <stdio.h>
#include <string.h>
#include <vad.h>

int main(int argc, char **argv)
{
	vad_client *c;
	void *p;
	size_t len = 1 << 20;
	int err;

	if (argc != 2) {
		fprintf(stderr, "usage: client SOCKET | --version\n");
		return 2;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("%s %s\n", VAD_VERSION_STRING, vad_strerror(VAD_ENOSPC));
		return 0;
	}
	err = vad_connect(argv[1], "pkg-test", &c);
	if (err) {
		fprintf(stderr, "vad_connect: %s\n", vad_last_error(NULL));
		return 1;
	}
	err = vad_alloc(c, len, 0, &p);
	if (err) {
		fprintf(stderr, "vad_alloc: %s\n", vad_last_error(c));
		vad_close(c);
		return 1;
	}
	for (size_t i = 0; i < len; i++)
		if (((unsigned char *)p)[i]) {
			fprintf(stderr, "a new range is not zero at %zu\n", i);
			return 1;
		}
	memset(p, 0x5a, len);
	if (vad_size(c, p) < len) {
		fprintf(stderr, "vad_size: %zu < %zu\n", vad_size(c, p), len);
		return 1;
	}
	err = vad_free(c, p);
	if (err) {
		fprintf(stderr, "vad_free: %s\n", vad_last_error(c));
		return 1;
	}
	vad_close(c);
	printf("ok\n");
	return 0;
}
