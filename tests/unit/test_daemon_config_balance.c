/* test_daemon_config_balance.c - vad.conf's worker_balance: both values, the default, and the
 * refusals with their line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static char conf_path[64];

/* Write text to a fresh temporary file; its path goes to conf_path. */
static const char *write_conf(const char *text)
{
	snprintf(conf_path, sizeof(conf_path), "/tmp/vad-test-balance-XXXXXX");
	int fd = mkstemp(conf_path);
	assert_true(fd >= 0);
	size_t len = strlen(text);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return conf_path;
}

/* Load text; returns vad_config_load's result, the error in err. */
static int load(const char *text, struct vad_config *cfg, char *err, size_t err_len)
{
	const char *path = write_conf(text);
	int rc = vad_config_load(path, cfg, err, err_len);
	unlink(path);
	return rc;
}

static enum vad_worker_balance balance_of(const char *text)
{
	struct vad_config cfg;
	char err[512] = "";
	if (load(text, &cfg, err, sizeof(err)) != 0)
		fail_msg("unexpected error: %s\n--- config:\n%s", err, text);
	enum vad_worker_balance b = cfg.worker_balance;
	vad_config_free(&cfg);
	return b;
}

/* Expect "FILE:LINE: ..." containing want. */
static void refused(const char *text, int line, const char *want)
{
	struct vad_config cfg;
	char err[512] = "";
	if (load(text, &cfg, err, sizeof(err)) == 0) {
		vad_config_free(&cfg);
		fail_msg("accepted, expected line %d: %s\n--- config:\n%s", line, want, text);
	}
	char prefix[128];
	snprintf(prefix, sizeof(prefix), "%s:%d: ", conf_path, line);
	if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, want))
		fail_msg("got \"%s\", expected prefix \"%s\" and \"%s\"", err, prefix, want);
	vad_config_free(&cfg);
}

static void test_default_is_adaptive(void **state)
{
	struct vad_config cfg;
	vad_config_defaults(&cfg);
	assert_int_equal(cfg.worker_balance, VAD_BALANCE_ADAPTIVE);
	assert_int_equal(balance_of("[vad]\nworkers = 2\n"), VAD_BALANCE_ADAPTIVE);
}

static void test_values(void **state)
{
	assert_int_equal(balance_of("[vad]\nworker_balance = adaptive\n"), VAD_BALANCE_ADAPTIVE);
	assert_int_equal(balance_of("[vad]\nworker_balance = even\n"), VAD_BALANCE_EVEN);
	assert_int_equal(balance_of("[vad]\nworker_balance = EVEN\n"), VAD_BALANCE_EVEN);
	assert_int_equal(balance_of("[vad]\nworkers = 4\nworker_balance = Adaptive\n"),
			 VAD_BALANCE_ADAPTIVE);
	/* one worker: the setting is accepted (and has nothing to balance) */
	assert_int_equal(balance_of("[vad]\nworkers = 1\nworker_balance = even\n"),
			 VAD_BALANCE_EVEN);
}

static void test_refusals(void **state)
{
	refused("[vad]\nworkers = 2\nworker_balance = fair\n", 3,
		"worker_balance = fair: not adaptive");
	refused("[vad]\nworker_balance = 1\n", 2, "worker_balance = 1");
	refused("[vad]\nworker_balance =\n", 2, "worker_balance");
	refused("[vad]\nworker_balance = even\nworker_balance = adaptive\n", 3, "worker_balance");
	refused("[arena a]\nsize = 1G\nworker_balance = even\n", 3, "worker_balance");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default_is_adaptive),
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
