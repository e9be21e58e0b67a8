/* test_daemon_metrics.c - the pieces of the metrics endpoint that need no daemon: label
 * escaping, metrics_listen addresses (accepted and refused with a sentence), and the
 * metrics_listen key in vad.conf. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "listen_addr.h"
#include "metrics.h"

static void test_escape(void **state)
{
	(void)state;
	char buf[64];
	assert_string_equal(vad_metrics_escape("default", buf, sizeof(buf)), "default");
	assert_string_equal(vad_metrics_escape("a\"b\\c\nd", buf, sizeof(buf)), "a\\\"b\\\\c\\nd");
	/* Cut short, never in the middle of an escape. */
	assert_string_equal(vad_metrics_escape("ab\"", buf, 4), "ab");
	assert_string_equal(vad_metrics_escape("abc", buf, 1), "");
}

static void test_listen_addr(void **state)
{
	(void)state;
	struct sockaddr_storage ss;
	socklen_t len;
	char err[160];
	assert_int_equal(vad_listen_addr_parse("127.0.0.1:9477", &ss, &len, err, sizeof(err)), 0);
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	assert_int_equal(v4->sin_family, AF_INET);
	assert_int_equal(ntohs(v4->sin_port), 9477);
	assert_int_equal(v4->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_int_equal(vad_listen_addr_parse("[::1]:1", &ss, &len, err, sizeof(err)), 0);
	assert_int_equal(((struct sockaddr_in6 *)&ss)->sin6_family, AF_INET6);
	assert_int_equal(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 1);
	assert_int_equal(vad_listen_addr_parse("0.0.0.0:65535", &ss, &len, err, sizeof(err)), 0);

	static const struct {
		const char *text, *why;
	} bad[] = {
	    {"9477", "expected ADDRESS:PORT"},
	    {"localhost:9477", "not a numeric IPv4 address"},
	    {"127.0.0.1:0", "from 1 to 65535"},
	    {"127.0.0.1:65536", "from 1 to 65535"},
	    {"127.0.0.1:", "from 1 to 65535"},
	    {"127.0.0.1:94x", "from 1 to 65535"},
	    {"127.0.0.1:-1", "from 1 to 65535"},
	    {"127.0.0.1:00000000009477", "from 1 to 65535"},
	    {"::1:9477", "not a numeric IPv4 address"},
	    {"[::1]9477", "brackets and a port"},
	    {"[::1", "brackets and a port"},
	    {"[nope]:1", "not a numeric IPv6 address"},
	    {"[]:1", "not a numeric IPv6 address"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (vad_listen_addr_parse(bad[i].text, &ss, &len, err, sizeof(err)) == 0)
			fail_msg("%s accepted", bad[i].text);
		if (!strstr(err, bad[i].why))
			fail_msg("%s: \"%s\" lacks \"%s\"", bad[i].text, err, bad[i].why);
	}
	char longer[VAD_LISTEN_ADDR_MAX + 8];
	memset(longer, '1', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	assert_int_equal(vad_listen_addr_parse(longer, &ss, &len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too long"));
}

static int load(const char *text, struct vad_config *cfg, char *err, size_t cap)
{
	char path[] = "/tmp/vad-test-metrics-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	int rc = vad_config_load(path, cfg, err, cap);
	unlink(path);
	return rc;
}

static void test_config_key(void **state)
{
	(void)state;
	struct vad_config cfg;
	char err[512];
	vad_config_defaults(&cfg);
	assert_string_equal(cfg.metrics_listen, ""); /* off unless configured */
	assert_int_equal(load("[vad]\nmetrics_listen = [::1]:9477\n", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.metrics_listen, "[::1]:9477");
	vad_config_free(&cfg);
	assert_int_equal(load("[vad]\nmetrics_listen =\n", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.metrics_listen, "");
	vad_config_free(&cfg);
	assert_int_equal(load("[vad]\n\nmetrics_listen = 9477\n", &cfg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, ":3: metrics_listen = 9477: expected ADDRESS:PORT"));
	/* A restart applies it: a reload does not rebind. */
	for (size_t i = 0; i < vad_config_key_count(); i++)
		if (!strcmp(vad_config_key_name(i), "metrics_listen"))
			assert_false(vad_config_key_reloadable(i));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escape),
	    cmocka_unit_test(test_listen_addr),
	    cmocka_unit_test(test_config_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
