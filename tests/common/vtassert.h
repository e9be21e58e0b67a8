/*
 * vtassert.h - cmocka assertions that explain libvad failures (code, name and the
 * daemon's sentence). For the test process only; forked children use VT_CHILD_CHECK.
 */
#ifndef VAD_TEST_VTASSERT_H
#define VAD_TEST_VTASSERT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

/* expr (a libvad call on client c) must return VAD_OK. */
#define VT_ASSERT_OK(c, expr)                                                                      \
	do {                                                                                       \
		int vt_rc_ = (expr);                                                               \
		if (vt_rc_ != VAD_OK)                                                              \
			fail_msg("%s returned %d (%s): \"%s\"", #expr, vt_rc_,                     \
				 vad_strerror(vt_rc_), (c) ? vad_last_error(c) : "");              \
	} while (0)

/* expr (a libvad call on client c) must fail with exactly want. */
#define VT_ASSERT_ERR(c, want, expr)                                                               \
	do {                                                                                       \
		int vt_rc_ = (expr);                                                               \
		if (vt_rc_ != (want))                                                              \
			fail_msg("%s returned %d (%s: \"%s\"), expected %d (%s)", #expr, vt_rc_,   \
				 vad_strerror(vt_rc_), (c) ? vad_last_error(c) : "", (int)(want),  \
				 vad_strerror(want));                                              \
	} while (0)

/* The vactl run o must have exited with want (prints its output otherwise). */
#define VT_ASSERT_EXIT(o, want, what)                                                              \
	do {                                                                                       \
		if ((o)->exit_code != (want)) {                                                    \
			vt_output_print(what, o);                                                  \
			fail_msg("%s exited %d, expected %d", what, (o)->exit_code, (int)(want));  \
		}                                                                                  \
	} while (0)

/* A cmocka test that sets up its own daemon in the zeroed vt_daemon *state; the
 * teardown stops and removes whatever it started. */
#define VT_OWN_DAEMON_TEST(f)                                                                      \
	cmocka_unit_test_setup_teardown(f, vt_fixture_blank_setup, vt_fixture_daemon_teardown)

#endif
