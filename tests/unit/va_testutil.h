/*
 * va_testutil.h - what several allocator unit tests (tests/unit/test_va_*.c) share: a
 * va_check after each step, and a polling wait for the background thread. Header-only
 * (static functions) because each test is built as its own program.
 */
#ifndef VA_TESTUTIL_H
#define VA_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

#include "vaspace.h"

/* Fail the test, naming the line, when va_check finds the space inconsistent. */
static inline void check_ok(struct va_space *vs, int line)
{
	char msg[256];

	if (va_check(vs, msg, sizeof(msg))) {
		print_error("va_check failed at line %d: %s\n", line, msg);
		fail();
	}
}
#define CHECK(vs) check_ok((vs), __LINE__)

static inline void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Wait (up to a generous limit) until cond holds; a liveness check, not a timing one. */
#define WAIT_FOR(cond)                                                                             \
	do {                                                                                       \
		for (unsigned w_ = 0; w_ < 3000 && !(cond); w_++)                                  \
			sleep_ms(10);                                                              \
		assert_true(cond);                                                                 \
	} while (0)

#endif
