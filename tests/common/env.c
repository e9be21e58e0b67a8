/* env.c - test environment: build directory, sanitizer mode scaling, clocks, patterns. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "harness.h"

const char *vt_build_dir(void)
{
	static char dir[PATH_MAX];
	if (dir[0])
		return dir;
	const char *env = getenv("VAD_BUILD_DIR");
	if (!env || !*env)
		env = "build";
	if (!realpath(env, dir)) {
		fprintf(stderr, "harness: build directory %s: %s (set VAD_BUILD_DIR)\n", env,
			strerror(errno));
		snprintf(dir, sizeof(dir), "%s", env);
	}
	return dir;
}

enum vt_mode vt_mode(void)
{
	const char *m = getenv("VAD_TEST_MODE");
	if (m && strcmp(m, "asan") == 0)
		return VT_MODE_ASAN;
	if (m && strcmp(m, "tsan") == 0)
		return VT_MODE_TSAN;
	return VT_MODE_NORMAL;
}

static int mode_factor(void)
{
	switch (vt_mode()) {
	case VT_MODE_ASAN:
		return 5;
	case VT_MODE_TSAN:
		return 10;
	default:
		return 1;
	}
}

int vt_scale(int n)
{
	int s = n / mode_factor();
	return s < 1 ? 1 : s;
}

int vt_timeout_ms(int ms)
{
	return ms * mode_factor();
}

uint64_t vt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void vt_sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

bool vt_is_root(void)
{
	return geteuid() == 0;
}

/* splitmix64: a cheap, well-mixed byte source so overlapping ranges cannot agree. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void vt_fill_pattern(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = mix(seed ^ (i * 0x100000001b3ull));
		size_t n = len - i < 8 ? len - i : 8;
		memcpy(p + i, &v, n);
	}
}

ssize_t vt_check_pattern(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *p = buf;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = mix(seed ^ (i * 0x100000001b3ull));
		size_t n = len - i < 8 ? len - i : 8;
		if (memcmp(p + i, &v, n) != 0) {
			for (size_t j = 0; j < n; j++)
				if (p[i + j] != ((uint8_t *)&v)[j])
					return (ssize_t)(i + j);
		}
	}
	return -1;
}

ssize_t vt_first_nonzero(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return (ssize_t)i;
	return -1;
}

bool vt_contains(const char *haystack, const char *needle)
{
	return haystack && strcasestr(haystack, needle) != NULL;
}

int vt_make_temp_dir(char *buf, size_t cap, const char *prefix)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	int n = snprintf(buf, cap, "%s/%s.XXXXXX", tmp, prefix);
	if (n < 0 || (size_t)n >= cap) {
		fprintf(stderr, "harness: temporary directory path %s/%s.XXXXXX is too long\n", tmp,
			prefix);
		return -1;
	}
	if (!mkdtemp(buf)) {
		fprintf(stderr, "harness: mkdtemp %s: %s\n", buf, strerror(errno));
		return -1;
	}
	return 0;
}

/* A test binary run alone behaves as under tests/run-tests: a connection the daemon dropped
 * stays dropped (VAD_EGONE) unless the test asks libvad to reconnect. */
__attribute__((constructor)) static void no_reconnect_by_default(void)
{
	setenv("VAD_RECONNECT_MS", "0", 0);
}
