/* test_daemon_config.c - vad.conf parsing: every key, units, refusals with their line. */
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
#include "log.h"

static char conf_path[64];

/* Write text to a fresh temporary file; its path goes to conf_path. */
static const char *write_conf(const char *text)
{
	snprintf(conf_path, sizeof(conf_path), "/tmp/vad-test-conf-XXXXXX");
	int fd = mkstemp(conf_path);
	assert_true(fd >= 0);
	size_t len = strlen(text);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return conf_path;
}

/* Load text, expecting success. */
static void load_ok(const char *text, struct vad_config *cfg)
{
	char err[512] = "";
	const char *path = write_conf(text);
	int rc = vad_config_load(path, cfg, err, sizeof(err));
	unlink(path);
	if (rc != 0)
		fail_msg("unexpected error: %s", err);
	assert_string_equal(cfg->path, path);
}

/* Load text, expecting "FILE:LINE: ..." containing want. */
static void load_err(const char *text, int line, const char *want)
{
	struct vad_config cfg;
	char err[512] = "";
	const char *path = write_conf(text);
	int rc = vad_config_load(path, &cfg, err, sizeof(err));
	unlink(path);
	if (rc == 0) {
		vad_config_free(&cfg);
		fail_msg("accepted, expected line %d: %s\n--- config:\n%s", line, want, text);
	}
	char prefix[128];
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, want))
		fail_msg("got \"%s\", expected prefix \"%s\" and \"%s\"", err, prefix, want);
	/* a failed load leaves nothing allocated behind */
	assert_null(cfg.arenas);
	assert_int_equal(cfg.n_arenas, 0);
	vad_config_free(&cfg);
}

static void test_defaults(void **state)
{
	(void)state;
	struct vad_config cfg;
	vad_config_defaults(&cfg);
	assert_string_equal(cfg.path, "");
	assert_string_equal(cfg.socket_path, "");
	assert_int_equal(cfg.socket_mode, 0660);
	assert_int_equal(cfg.workers, 0);
	assert_int_equal(cfg.nodes, 0);
	assert_int_equal(cfg.lazy_max, 0);
	assert_int_equal(cfg.max_frame, 64 * 1024);
	assert_int_equal(cfg.max_clients, 1024);
	assert_int_equal(cfg.max_batch, 1024);
	assert_int_equal(cfg.quota_client, 0);
	assert_int_equal(cfg.quota_uid, 0);
	assert_false(cfg.has_admin_group);
	assert_int_equal(cfg.stats_interval_ms, 10000);
	assert_int_equal(cfg.stats_retention_ms, 30ull * 86400 * 1000);
	assert_int_equal(cfg.log_level, VAD_LOG_INFO);
	assert_int_equal(cfg.n_arenas, 0);
	assert_null(cfg.arenas);
}

static void check_default_arena(const struct vad_config *cfg)
{
	assert_int_equal(cfg->n_arenas, 1);
	assert_string_equal(cfg->arenas[0].name, "default");
	assert_int_equal(cfg->arenas[0].size, 4ull << 30);
	assert_int_equal(cfg->arenas[0].quantum, (uint64_t)sysconf(_SC_PAGESIZE));
	assert_string_equal(cfg->arenas[0].backing, "");
	assert_true(cfg->arenas[0].allow_any);
	assert_int_equal(cfg->arenas[0].n_allow_uids, 0);
	assert_int_equal(cfg->arenas[0].n_allow_gids, 0);
}

static void test_builtin_defaults_get_default_arena(void **state)
{
	(void)state;
	struct vad_config cfg;
	char err[256];
	assert_int_equal(vad_config_load(NULL, &cfg, err, sizeof(err)), 0);
	check_default_arena(&cfg);
	vad_config_free(&cfg);
	assert_null(cfg.arenas);
	assert_int_equal(cfg.n_arenas, 0);

	assert_int_equal(vad_config_load("", &cfg, err, sizeof(err)), 0);
	check_default_arena(&cfg);
	vad_config_free(&cfg);
}

static void test_file_without_arena_gets_default(void **state)
{
	(void)state;
	struct vad_config cfg;
	load_ok("[vad]\nworkers = 3\n", &cfg);
	assert_int_equal(cfg.workers, 3);
	check_default_arena(&cfg);
	vad_config_free(&cfg);

	load_ok("", &cfg); /* an empty file is a valid config */
	check_default_arena(&cfg);
	vad_config_free(&cfg);
}

static void test_every_key(void **state)
{
	(void)state;
	struct vad_config cfg;
	load_ok("# every key once\n"
		"[vad]\n"
		"socket = /tmp/vad-test/vad.sock\n"
		"socket_mode = 0600\n"
		"workers = 4\n"
		"worker_spread_idle = 0.75\n"
		"nodes = 8\n"
		"lazy_max = 64M\n"
		"max_frame = 1M\n"
		"max_clients = 77\n"
		"max_batch = 99\n"
		"quota_client = 1G\n"
		"quota_uid = 1.5G\n"
		"admin_group = root\n"
		"stats_db = /tmp/vad-test/stats.db\n"
		"stats_interval = 250ms\n"
		"stats_retention = 2h\n"
		"log_level = debug\n"
		"\n"
		"[arena big]\n"
		"size = 64G\n"
		"quantum = 2M\n"
		"backing = memfd\n"
		"allow_uids = root, 1000\n"
		"allow_gids = root,4242\n"
		"\n"
		"[arena tmp]\n"
		"size = 1M\n"
		"backing = /tmp\n",
		&cfg);
	assert_string_equal(cfg.socket_path, "/tmp/vad-test/vad.sock");
	assert_int_equal(cfg.socket_mode, 0600);
	assert_int_equal(cfg.workers, 4);
	assert_true(cfg.worker_spread_idle == 0.75);
	assert_int_equal(cfg.nodes, 8);
	assert_int_equal(cfg.lazy_max, 64ull << 20);
	assert_int_equal(cfg.max_frame, 1u << 20);
	assert_int_equal(cfg.max_clients, 77);
	assert_int_equal(cfg.max_batch, 99);
	assert_int_equal(cfg.quota_client, 1ull << 30);
	assert_int_equal(cfg.quota_uid, 3ull << 29);
	assert_true(cfg.has_admin_group);
	assert_int_equal(cfg.admin_gid, 0);
	assert_string_equal(cfg.stats_db, "/tmp/vad-test/stats.db");
	assert_int_equal(cfg.stats_interval_ms, 250);
	assert_int_equal(cfg.stats_retention_ms, 2ull * 3600 * 1000);
	assert_int_equal(cfg.log_level, VAD_LOG_DEBUG);

	assert_int_equal(cfg.n_arenas, 2);
	const struct vad_arena_conf *a = &cfg.arenas[0];
	assert_string_equal(a->name, "big");
	assert_int_equal(a->size, 64ull << 30);
	assert_int_equal(a->quantum, 2ull << 20);
	assert_string_equal(a->backing, "");
	assert_false(a->allow_any);
	assert_int_equal(a->n_allow_uids, 2);
	assert_int_equal(a->allow_uids[0], 0);
	assert_int_equal(a->allow_uids[1], 1000);
	assert_int_equal(a->n_allow_gids, 2);
	assert_int_equal(a->allow_gids[0], 0);
	assert_int_equal(a->allow_gids[1], 4242);

	a = &cfg.arenas[1];
	assert_string_equal(a->name, "tmp");
	assert_int_equal(a->size, 1u << 20);
	assert_int_equal(a->quantum, (uint64_t)sysconf(_SC_PAGESIZE));
	assert_string_equal(a->backing, "/tmp");
	assert_true(a->allow_any);
	vad_config_free(&cfg);
}

static void test_spellings(void **state)
{
	(void)state;
	struct vad_config cfg;
	/* auto, unlimited, quotes, inline comments, CRLF, indentation, case of keys */
	load_ok("[vad]\r\n"
		"  workers = auto\r\n"
		"nodes = 0 ; one per CPU\r\n"
		"lazy_max = auto\r\n"
		"quota_client = unlimited\r\n"
		"quota_uid = 8G\r\n"
		"socket = \"/tmp/quoted.sock\"\r\n"
		"Socket_Mode = 660\r\n"
		"log_level = warning\r\n"
		"stats_interval = 10\r\n"
		"[ arena  spaced ]\r\n"
		"size = 8K\r\n"
		"allow_gids = 0\r\n",
		&cfg);
	assert_int_equal(cfg.workers, 0);
	assert_int_equal(cfg.nodes, 0);
	assert_int_equal(cfg.lazy_max, 0);
	assert_int_equal(cfg.quota_client, 0);
	assert_int_equal(cfg.quota_uid, 8ull << 30);
	assert_string_equal(cfg.socket_path, "/tmp/quoted.sock");
	assert_int_equal(cfg.socket_mode, 0660);
	assert_int_equal(cfg.log_level, VAD_LOG_WARNING);
	assert_int_equal(cfg.stats_interval_ms, 10000);
	assert_int_equal(cfg.n_arenas, 1);
	assert_string_equal(cfg.arenas[0].name, "spaced");
	assert_false(cfg.arenas[0].allow_any);
	assert_int_equal(cfg.arenas[0].n_allow_uids, 0);
	assert_int_equal(cfg.arenas[0].n_allow_gids, 1);
	vad_config_free(&cfg);

	/* a UTF-8 byte order mark before the first section */
	load_ok("\xef\xbb\xbf[vad]\nworkers = 2\n", &cfg);
	assert_int_equal(cfg.workers, 2);
	vad_config_free(&cfg);

	/* empty socket and stats_db mean "the standard path" */
	load_ok("[vad]\nsocket =\nstats_db =\n", &cfg);
	assert_string_equal(cfg.socket_path, "");
	assert_string_equal(cfg.stats_db, "");
	vad_config_free(&cfg);

	/* limits at both ends */
	load_ok("[vad]\nmax_frame = 4K\nmax_clients = 1\nmax_batch = 1\n", &cfg);
	assert_int_equal(cfg.max_frame, 4096);
	vad_config_free(&cfg);
	load_ok("[vad]\nmax_frame = 16M\nworkers = 1024\n", &cfg);
	assert_int_equal(cfg.max_frame, 16u << 20);
	assert_int_equal(cfg.workers, 1024);
	vad_config_free(&cfg);
}

static void test_parse_size(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = {
	    {"0", 0},
	    {"4096", 4096},
	    {"17B", 17},
	    {"4K", 4096},
	    {"4k", 4096},
	    {"4KiB", 4096},
	    {"4 KiB", 4096},
	    {"4KB", 4096},
	    {"1.5M", 1572864},
	    {".5K", 512},
	    {"2.25K", 2304},
	    {"64G", 64ull << 30},
	    {"3T", 3ull << 40},
	    {"1P", 1ull << 50},
	    {"15E", 15ull << 60},
	    {"18446744073709551615", UINT64_MAX},
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t v = 12345;
		if (vad_parse_size(good[i].s, &v) != 0)
			fail_msg("refused \"%s\"", good[i].s);
		assert_int_equal(v, good[i].v);
	}
	static const char *const bad[] = {
	    "",	   "K",	    "-1",    "+1",    "1.1K", "0.1",
	    "4X",  "1..5K", "1.5.K", "4 K B", "16E",  "18446744073709551616",
	    "1e3", " 4K",   "4K ",   "0x10",  "1,5M",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v;
		if (vad_parse_size(bad[i], &v) == 0)
			fail_msg("accepted \"%s\" as %llu", bad[i], (unsigned long long)v);
	}
	uint64_t v;
	assert_int_equal(vad_parse_size(NULL, &v), -1);
}

static void test_parse_duration(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		uint64_t ms;
	} good[] = {
	    {"250ms", 250},	  {"10s", 10000},   {"10", 10000},   {"1.5s", 1500},
	    {"5m", 300000},	  {"5min", 300000}, {"2h", 7200000}, {"30d", 2592000000ull},
	    {"1w", 604800000ull}, {"0ms", 0},	    {"10 s", 10000},
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t v = 12345;
		if (vad_parse_duration_ms(good[i].s, &v) != 0)
			fail_msg("refused \"%s\"", good[i].s);
		assert_int_equal(v, good[i].ms);
	}
	static const char *const bad[] = {"", "s", "10x", "0.5ms", "-1s", "1.0001s", "10sec s"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v;
		if (vad_parse_duration_ms(bad[i], &v) == 0)
			fail_msg("accepted \"%s\" as %llu", bad[i], (unsigned long long)v);
	}
}

static void test_format_size(void **state)
{
	(void)state;
	static const struct {
		uint64_t v;
		const char *s;
	} cases[] = {
	    {0, "0 B"},
	    {17, "17 B"},
	    {1023, "1023 B"},
	    {1024, "1.0 KiB"},
	    {1536, "1.5 KiB"},
	    {512ull << 10, "512 KiB"},
	    {(1ull << 20) - 1, "1.0 MiB"},
	    {1ull << 30, "1.0 GiB"},
	    {3ull << 29, "1.5 GiB"},
	    {64ull << 30, "64 GiB"},
	    {1ull << 60, "1.0 EiB"},
	    {UINT64_MAX, "16 EiB"},
	};
	char buf[32];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(vad_format_size(cases[i].v, buf, sizeof(buf)), cases[i].s);
	/* a short buffer is cut, never overrun */
	char tiny[4];
	assert_string_equal(vad_format_size(64ull << 30, tiny, sizeof(tiny)), "64 ");
}

static void test_log_level_names(void **state)
{
	(void)state;
	assert_int_equal(vad_log_level_from_name("err"), VAD_LOG_ERR);
	assert_int_equal(vad_log_level_from_name("warning"), VAD_LOG_WARNING);
	assert_int_equal(vad_log_level_from_name("notice"), VAD_LOG_NOTICE);
	assert_int_equal(vad_log_level_from_name("info"), VAD_LOG_INFO);
	assert_int_equal(vad_log_level_from_name("DEBUG"), VAD_LOG_DEBUG);
	assert_int_equal(vad_log_level_from_name("7"), VAD_LOG_DEBUG);
	assert_int_equal(vad_log_level_from_name("loud"), -1);
	assert_int_equal(vad_log_level_from_name("8"), -1);
	assert_int_equal(vad_log_level_from_name(NULL), -1);
}

static void test_errors_vad_section(void **state)
{
	(void)state;
	load_err("[vad]\nbogus = 1\n", 2, "unknown key 'bogus' in [vad]");
	load_err("[vad]\nworkers = 2\n\n[foo]\n", 4, "unknown section [foo]");
	load_err("workers = 2\n", 1, "outside any section");
	load_err("# comment\n\n; another\n[vad]\n\n   workers = many\n", 6, "workers = many");
	load_err("[vad]\nworkers = 1025\n", 2, "workers");
	load_err("[vad]\nnodes = -1\n", 2, "nodes");
	load_err("[vad]\nworkers =\n", 2, "empty value");
	load_err("[vad]\nworkers = 1\nnodes = 2\nworkers = 2\n", 4,
		 "duplicate key workers (first set at line 2)");
	load_err("[vad]\n[vad]\n", 2, "duplicate section [vad] (first at line 1)");
	load_err("[vad]\nthis line has no equals sign\n", 2, "syntax error");
	load_err("[vad]\nworkers = 1\n[vad\n", 3, "syntax error");
	load_err("[vad]\n= 5\n", 2, "without a key name");
	load_err("[vad]\nsocket = relative.sock\n", 2, "absolute path");
	load_err("[vad]\nsocket = /tmp/"
		 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.sock\n",
		 2, "path too long");
	load_err("[vad]\nsocket_mode = 0999\n", 2, "not an octal permission mode");
	load_err("[vad]\nsocket_mode = rw-rw----\n", 2, "not an octal permission mode");
	load_err("[vad]\nsocket_mode = 01777\n", 2, "not an octal permission mode");
	load_err("[vad]\nlazy_max = lots\n", 2, "bad size");
	load_err("[vad]\nmax_frame = 1K\n", 2, "between 4 KiB and 16 MiB");
	load_err("[vad]\nmax_frame = 4095\n", 2, "between 4 KiB and 16 MiB");
	load_err("[vad]\nmax_frame = 17M\n", 2, "between 4 KiB and 16 MiB");
	load_err("[vad]\nmax_clients = 0\n", 2, "max_clients");
	load_err("[vad]\nmax_batch = 2000000\n", 2, "max_batch");
	load_err("[vad]\nquota_client = 0\n", 2, "unlimited");
	load_err("[vad]\nquota_uid = some\n", 2, "bad size");
	load_err("[vad]\nadmin_group = no-such-group-vadtest\n", 2, "unknown group");
	load_err("[vad]\nstats_db = stats.db\n", 2, "absolute path");
	load_err("[vad]\nstats_interval = soon\n", 2, "bad duration");
	load_err("[vad]\nstats_interval = 10ms\n", 2, "out of range");
	load_err("[vad]\nstats_retention = 30s\n", 2, "out of range");
	load_err("[vad]\nstats_interval = 2h\nstats_retention = 1h\n", 3,
		 "shorter than stats_interval");
	load_err("[vad]\nlog_level = loud\n", 2, "log_level");
	/* the last line has no newline */
	load_err("[vad]\nworkers = 1\nnodes = x", 3, "nodes");
}

static void test_errors_arena_section(void **state)
{
	(void)state;
	long page = sysconf(_SC_PAGESIZE);
	load_err("[arena a]\nsize = 4G\nspeed = fast\n", 3, "unknown key 'speed' in [arena a]");
	load_err("[arena]\nsize = 4G\n", 1, "needs a name");
	load_err("[arena a/b]\nsize = 4G\n", 1, "bad arena name");
	load_err("[arena "
		 "a1234567890123456789012345678901234567890123456789012345678901234]\nsize=4G\n",
		 1, "bad arena name");
	load_err("[arena a]\nsize = 4K\n\n[arena b]\nsize = 4K\n[arena a]\nsize = 4K\n", 6,
		 "duplicate arena 'a' (first defined at line 1)");
	load_err("[vad]\n\n[arena x]\nbacking = memfd\n", 3, "[arena x] has no size");
	/* the next section closes the arena: the error still points at its header */
	load_err("[arena x]\nquantum = 8K\n[vad]\nworkers = 1\n", 1, "has no size");
	load_err("[arena a]\nsize = 0\n", 2, "between 1 byte");
	load_err("[arena a]\nsize = 2E\n", 2, "between 1 byte");
	load_err("[arena a]\nsize = huge\n", 2, "bad size");
	load_err("[arena a]\nsize = 4GB\n", 2, "size = 4GB: did you mean 4G (GiB)?");
	load_err("[vad]\nmax_frame = 64kb\n", 2, "did you mean 64k (KiB)?");
	load_err("[arena a]\nsize = 12K\nquantum = 12K\n", 3, "not a power of two");
	load_err("[arena a]\nsize = 12K\nquantum = 0\n", 3, "not a power of two");
	if (page > 1024)
		load_err("[arena a]\nsize = 12K\nquantum = 1K\n", 3, "smaller than the page size");
	load_err("[arena a]\nsize = 4G\nquantum = 2G\n", 3, "larger than 1 GiB");
	load_err("[arena a]\nsize = 5000\n", 2, "not a multiple of the quantum");
	/* quantum given after size: the error is on the size line */
	load_err("[arena a]\nsize = 12K\nbacking = memfd\nquantum = 8K\n", 2,
		 "size 12288 is not a multiple of the quantum 8.0 KiB");
	load_err("[arena a]\nsize = 4K\nbacking = relative/dir\n", 3, "absolute path");
	load_err("[arena a]\nsize = 4K\nbacking = /nonexistent-vad-test-dir\n", 3,
		 "No such file or directory");
	load_err("[arena a]\nsize = 4K\nbacking = /etc/passwd\n", 3, "not a directory");
	load_err("[arena a]\nsize = 4K\nallow_uids = root, no-such-user-vadtest\n", 3,
		 "unknown user 'no-such-user-vadtest'");
	load_err("[arena a]\nsize = 4K\nallow_gids = no-such-group-vadtest\n", 3,
		 "unknown group 'no-such-group-vadtest'");
	load_err("[arena a]\nsize = 4K\nallow_uids = root,,1000\n", 3, "empty entry");
	load_err("[arena a]\nsize = 4K\nallow_uids = root,\n", 3, "empty entry");
	load_err("[arena a]\nsize = 4K\nallow_gids = 4294967295\n", 3, "unknown group");
	load_err("[arena a]\nsize = 4K\nsize = 8K\n", 3, "duplicate key size");
	load_err("[arena a]\nsize =\n", 2, "empty value");
}

static void test_error_line_too_long(void **state)
{
	(void)state;
	char text[2048];
	int n = snprintf(text, sizeof(text), "[vad]\nworkers = 1\nstats_db = /tmp/");
	memset(text + n, 'x', 1500);
	strcpy(text + n + 1500, "\n");
	load_err(text, 3, "line too long");
}

static void test_missing_file(void **state)
{
	(void)state;
	struct vad_config cfg;
	char err[256];
	assert_int_equal(vad_config_load("/nonexistent-vad-test.conf", &cfg, err, sizeof(err)), -1);
	assert_string_equal(err, "/nonexistent-vad-test.conf: No such file or directory");
	assert_null(cfg.arenas);
	vad_config_free(&cfg);

	assert_int_equal(vad_config_load("/tmp", &cfg, err, sizeof(err)), -1);
	assert_string_equal(err, "/tmp: Is a directory");
}

/* reader_uids/reader_gids: parsed like the allow-lists, and refused where no allow-list names
 * the writers, at the line of the reader key (the first one when both are given). */
/* A '#' after whitespace ends a line's value, as a ';' does; not inside double quotes. */
static void test_trailing_comments(void **state)
{
	(void)state;
	struct vad_config cfg;
	load_ok("[vad]\nworkers = 3   # three\nmax_batch = 7\t# tab\n"
		"socket = \"/tmp/a #b/vad.sock\"  # quoted\n[arena a]  # the first\nsize = 1M #\n",
		&cfg);
	assert_int_equal(3, cfg.workers);
	assert_int_equal(7, cfg.max_batch);
	assert_string_equal("/tmp/a #b/vad.sock", cfg.socket_path);
	assert_string_equal("a", cfg.arenas[0].name);
	assert_int_equal(1u << 20, cfg.arenas[0].size);
	vad_config_free(&cfg);
	load_err("[vad]\nworkers = 3#no space\n", 2, "workers");
}

/* Every error of a file is reported, in order, one line each, then their count; a refused
 * header's keys and a refused key's consequences are not errors of their own. */
static void test_every_error_reported(void **state)
{
	(void)state;
	struct vad_config cfg;
	char err[2048] = "";
	const char *path = write_conf("[vad]\n"
				      "workers = auto   # one per CPU\n" /* fine */
				      "max_clients = 0\n"		 /* 3 */
				      "socket = /tmp/vad#1/vad.sock\n"	 /* fine: '#' in a value */
				      "log_level = loud\n"		 /* 5 */
				      "no equals sign here\n"		 /* 6 */
				      "[arena a]\n"
				      "size = 4GB\n"  /* 8; no "has no size" after it */
				      "[bad name!]\n" /* 9; its keys are skipped */
				      "size = 1\n"
				      "bogus = 2\n"
				      "[arena b\n"	/* 12 */
				      "[arena c]\n"	/* 13: no size */
				      "quantum = 3\n"); /* 14; no size-multiple check */
	int rc = vad_config_load(path, &cfg, err, sizeof(err));
	assert_int_equal(rc, -1);
	assert_null(cfg.arenas);
	static const struct {
		int line;
		const char *want;
	} want[] = {
	    {3, "max_clients = 0"},	   {5, "log_level = loud"},
	    {6, "syntax error"},	   {8, "did you mean 4G"},
	    {9, "unknown section"},	   {12, "needs its ']'"},
	    {13, "[arena c] has no size"}, {14, "quantum = 3: not a power of two"},
	};
	char *save = NULL, *line = strtok_r(err, "\n", &save);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char prefix[128];
		snprintf(prefix, sizeof(prefix), "%s:%d: ", path, want[i].line);
		if (!line || strncmp(line, prefix, strlen(prefix)) != 0 ||
		    !strstr(line, want[i].want))
			fail_msg("error %zu: got \"%s\", expected \"%s%s\"", i,
				 line ? line : "(none)", prefix, want[i].want);
		line = strtok_r(NULL, "\n", &save);
	}
	char count[128];
	snprintf(count, sizeof(count), "%s: 8 errors", path);
	assert_non_null(line);
	assert_string_equal(line, count);
	assert_null(strtok_r(NULL, "\n", &save));
	unlink(path);
}

/* A file of many errors: the message stays within its buffer, whole lines, and the count
 * (with how many did not fit) is always its last line. */
static void test_many_errors_bounded(void **state)
{
	(void)state;
	size_t n = 2000, cap = 16 + n * 16;
	char *text = malloc(cap);
	assert_non_null(text);
	size_t len = (size_t)snprintf(text, cap, "[vad]\n");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, cap - len, "workers = x%zu\n", i);
	const char *path = write_conf(text);
	free(text);
	struct vad_config cfg;
	char err[512];
	memset(err, 'z', sizeof(err));
	assert_int_equal(vad_config_load(path, &cfg, err, sizeof(err)), -1);
	assert_non_null(memchr(err, '\0', sizeof(err)));
	const char *last = strrchr(err, '\n');
	assert_non_null(last);
	char count[128];
	snprintf(count, sizeof(count), "\n%s: %zu errors (", path, n);
	assert_int_equal(strncmp(last, count, strlen(count)), 0);
	assert_non_null(strstr(last, "more not shown)"));
	/* the first error stays, and the cut lines are whole */
	char first[128];
	snprintf(first, sizeof(first), "%s:2: workers = x0", path);
	assert_int_equal(strncmp(err, first, strlen(first)), 0);
	/* with no room for a second line, the first is still there, cut */
	char tiny[24];
	assert_int_equal(vad_config_load(path, &cfg, tiny, sizeof(tiny)), -1);
	assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
	unlink(path);
}

/* tenancy, tenant_idle, max_tenants: values, defaults, and the rules that tie them. */
static void test_tenancy(void **state)
{
	(void)state;
	struct vad_config cfg;
	load_ok("[arena a]\nsize = 1M\ntenancy = uid\ntenant_idle = 90s\nmax_tenants = 7\n"
		"[arena b]\nsize = 1M\ntenancy = GID\n[arena c]\nsize = 1M\n",
		&cfg);
	assert_int_equal(VAD_TENANCY_UID, cfg.arenas[0].tenancy);
	assert_int_equal(90000, cfg.arenas[0].tenant_idle_ms);
	assert_int_equal(7, cfg.arenas[0].max_tenants);
	assert_int_equal(VAD_TENANCY_GID, cfg.arenas[1].tenancy);
	assert_int_equal(VAD_TENANT_IDLE_DEFAULT_MS, cfg.arenas[1].tenant_idle_ms);
	assert_int_equal(VAD_MAX_TENANTS_DEFAULT, cfg.arenas[1].max_tenants);
	assert_int_equal(VAD_TENANCY_NONE, cfg.arenas[2].tenancy);
	assert_string_equal("uid", vad_tenancy_name(cfg.arenas[0].tenancy));
	vad_config_free(&cfg);

	load_err("[arena a]\nsize = 1M\ntenancy = user\n", 3, "expected none, uid");
	load_err("[arena a]\nsize = 1M\ntenant_idle = 1m\n", 3, "which has no tenancy");
	load_err("[arena a]\nsize = 1M\nmax_tenants = 3\ntenancy = none\n", 3,
		 "which has no tenancy");
	load_err("[arena a]\nsize = 1M\ntenancy = uid\ntenant_idle = 0s\n", 4,
		 "a duration above 0");
	load_err("[arena a]\nsize = 1M\ntenancy = uid\nmax_tenants = 0\n", 4,
		 "a number from 1 to 65536");
	load_err("[arena a]\nsize = 1M\ntenancy = uid\nmax_tenants = 40000\n"
		 "[arena b]\nsize = 1M\ntenancy = uid\nmax_tenants = 30000\n",
		 7, "more than 65536");
	load_err("[arena a]\nsize = 1M\nallow_uids = 0\nreader_uids = 1001\ntenancy = uid\n", 5,
		 "has tenancy and readers");
	load_err("[arena abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzA]\nsize = 1M\n"
		 "tenancy = uid\n",
		 3, "at most 52 characters");
}

static void test_readers(void **state)
{
	(void)state;
	struct vad_config cfg;
	load_ok("[arena feed]\n"
		"size = 8K\n"
		"allow_uids = 61000\n"
		"reader_uids = 61001, root\n"
		"reader_gids = 4242\n"
		"[arena plain]\n"
		"size = 8K\n"
		"allow_gids = 0\n",
		&cfg);
	const struct vad_arena_conf *a = &cfg.arenas[0];
	assert_false(a->allow_any);
	assert_int_equal(a->n_allow_uids, 1);
	assert_int_equal(a->n_reader_uids, 2);
	assert_int_equal(a->reader_uids[0], 61001);
	assert_int_equal(a->reader_uids[1], 0);
	assert_int_equal(a->n_reader_gids, 1);
	assert_int_equal(a->reader_gids[0], 4242);
	a = &cfg.arenas[1];
	assert_int_equal(a->n_reader_uids, 0);
	assert_null(a->reader_uids);
	assert_int_equal(a->n_reader_gids, 0);
	vad_config_free(&cfg);

	/* groups alone, writers named by group */
	load_ok("[arena feed]\nsize = 8K\nallow_gids = 0\nreader_gids = 1, 2\n", &cfg);
	assert_int_equal(cfg.arenas[0].n_reader_gids, 2);
	assert_int_equal(cfg.arenas[0].n_reader_uids, 0);
	vad_config_free(&cfg);

	/* an arena open to everyone has no readers to hold to reading */
	load_err("[arena open]\nsize = 8K\nreader_uids = 61001\n", 3,
		 "reader_uids in [arena open], which has neither allow_uids nor allow_gids");
	load_err("[arena open]\nsize = 8K\nreader_gids = 4242\nreader_uids = 1\n[arena b]\n"
		 "size = 8K\n",
		 3, "reader_gids in [arena open], which has neither allow_uids nor allow_gids");
	load_err("[arena open]\nsize = 8K\nreader_uids = 1\nreader_gids = 2\n", 3,
		 "every peer may write");
	/* the list syntax is the allow-lists' */
	load_err("[arena a]\nsize = 4K\nallow_uids = 1\nreader_uids = 2,,3\n", 4,
		 "reader_uids: empty entry");
	load_err("[arena a]\nsize = 4K\nallow_uids = 1\nreader_uids = no-such-user-vadtest\n", 4,
		 "reader_uids: unknown user 'no-such-user-vadtest'");
	load_err("[arena a]\nsize = 4K\nallow_uids = 1\nreader_gids = no-such-group-vadtest\n", 4,
		 "reader_gids: unknown group 'no-such-group-vadtest'");
	load_err("[arena a]\nsize = 4K\nallow_uids = 1\nreader_gids = 1\nreader_gids = 2\n", 5,
		 "duplicate key reader_gids");
	load_err("[arena a]\nsize = 4K\nallow_uids = 1\nreader_uids =\n", 4, "empty value");
}

/* Reloading is loading again: a second load into the same struct after free is clean. */
static void test_load_free_load(void **state)
{
	(void)state;
	struct vad_config cfg;
	load_ok("[arena a]\nsize = 8K\nallow_uids = 1,2,3\n[arena b]\nsize = 8K\n", &cfg);
	assert_int_equal(cfg.n_arenas, 2);
	assert_int_equal(cfg.arenas[0].n_allow_uids, 3);
	vad_config_free(&cfg);
	vad_config_free(&cfg); /* twice is harmless */
	load_ok("[arena c]\nsize = 8K\n", &cfg);
	assert_int_equal(cfg.n_arenas, 1);
	assert_string_equal(cfg.arenas[0].name, "c");
	vad_config_free(&cfg);
}

/* The shipped conf/vad.conf must load (tests run from the source root). */
static void test_shipped_config(void **state)
{
	(void)state;
	if (access("conf/vad.conf", R_OK) != 0)
		skip();
	struct vad_config cfg;
	char err[512];
	if (vad_config_load("conf/vad.conf", &cfg, err, sizeof(err)) != 0)
		fail_msg("conf/vad.conf: %s", err);
	check_default_arena(&cfg);
	assert_string_equal(cfg.socket_path, "/run/vad/vad.sock");
	assert_string_equal(cfg.stats_db, "/var/lib/vad/stats.db");
	vad_config_free(&cfg);
}

/* ---- worker_balance ------------------------------------------------------------------- */

/* The settings text loads to, arenas freed: only its scalar fields are for reading. */
static struct vad_config settings_of(const char *text)
{
	struct vad_config cfg;
	load_ok(text, &cfg);
	vad_config_free(&cfg);
	return cfg;
}

static enum vad_worker_balance balance_of(const char *text)
{
	return settings_of(text).worker_balance;
}

static void test_balance_default_is_adaptive(void **state)
{
	struct vad_config cfg;
	vad_config_defaults(&cfg);
	assert_int_equal(cfg.worker_balance, VAD_BALANCE_ADAPTIVE);
	assert_int_equal(balance_of("[vad]\nworkers = 2\n"), VAD_BALANCE_ADAPTIVE);
}

static void test_balance_values(void **state)
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

static void test_balance_refusals(void **state)
{
	load_err("[vad]\nworkers = 2\nworker_balance = fair\n", 3,
		 "worker_balance = fair: not adaptive");
	load_err("[vad]\nworker_balance = 1\n", 2, "worker_balance = 1");
	load_err("[vad]\nworker_balance =\n", 2, "worker_balance");
	load_err("[vad]\nworker_balance = even\nworker_balance = adaptive\n", 3, "worker_balance");
	load_err("[arena a]\nsize = 1G\nworker_balance = even\n", 3, "worker_balance");
}

/* ---- worker_spread_idle ---------------------------------------------------------------- */

static double spread_idle_of(const char *text)
{
	return settings_of(text).worker_spread_idle;
}

static void test_spread_idle_values(void **state)
{
	struct vad_config cfg;
	vad_config_defaults(&cfg);
	assert_true(cfg.worker_spread_idle == 0.4);
	assert_true(spread_idle_of("[vad]\nworkers = 2\n") == 0.4);
	assert_true(spread_idle_of("[vad]\nworker_spread_idle = 0\n") == 0);
	assert_true(spread_idle_of("[vad]\nworker_spread_idle = 0.25\n") == 0.25);
	assert_true(spread_idle_of("[vad]\nworker_spread_idle = 3\n") == 3);
	assert_true(spread_idle_of("[vad]\nworker_spread_idle = 1.5\n") == 1.5);
}

static void test_spread_idle_refusals(void **state)
{
	load_err("[vad]\nworker_spread_idle = -0.5\n", 2, "worker_spread_idle = -0.5: expected");
	load_err("[vad]\nworker_spread_idle = half\n", 2, "worker_spread_idle = half");
	load_err("[vad]\nworker_spread_idle = 0.4x\n", 2, "worker_spread_idle = 0.4x");
	load_err("[vad]\nworker_spread_idle = nan\n", 2, "worker_spread_idle = nan");
	load_err("[vad]\nworker_spread_idle = 1e300\n", 2, "worker_spread_idle = 1e300");
	load_err("[vad]\nworker_spread_idle =\n", 2, "worker_spread_idle");
	load_err("[arena a]\nsize = 1G\nworker_spread_idle = 1\n", 3, "worker_spread_idle");
}

/* accept_unsealed: yes/no spellings, off by default, the header line kept for messages,
 * and refused on a memfd arena (always sealed) or with a value that is not yes or no. */
static void test_accept_unsealed(void **state)
{
	(void)state;
	struct vad_config cfg;
	load_ok("[vad]\nworkers = 1\n\n[arena disk]\nsize = 4M\nbacking = /tmp\n"
		"accept_unsealed = yes\n[arena other]\nsize = 4M\nbacking = /tmp\n"
		"accept_unsealed = No\n[arena plain]\nsize = 4M\n",
		&cfg);
	assert_int_equal(cfg.n_arenas, 3);
	assert_true(cfg.arenas[0].accept_unsealed);
	assert_int_equal(cfg.arenas[0].line, 4);
	assert_false(cfg.arenas[1].accept_unsealed);
	assert_int_equal(cfg.arenas[1].line, 8);
	assert_false(cfg.arenas[2].accept_unsealed);
	vad_config_free(&cfg);
	const char *yes[] = {"true", "on", "1", "YES"};
	for (size_t i = 0; i < 4; i++) {
		char text[128];
		snprintf(text, sizeof(text),
			 "[arena d]\nsize = 4M\nbacking = /tmp\naccept_unsealed = %s\n", yes[i]);
		load_ok(text, &cfg);
		assert_true(cfg.arenas[0].accept_unsealed);
		vad_config_free(&cfg);
	}
	load_err("[arena d]\nsize = 4M\nbacking = /tmp\naccept_unsealed = maybe\n", 4,
		 "accept_unsealed = maybe: expected yes or no");
	load_err("[arena d]\nsize = 4M\naccept_unsealed = yes\n", 3, "a memfd is always sealed");
	load_err("[arena d]\nsize = 4M\nbacking = memfd\naccept_unsealed = yes\n", 4,
		 "a memfd is always sealed");
	load_err("[arena d]\nsize = 4M\nbacking = /tmp\naccept_unsealed = yes\n"
		 "accept_unsealed = no\n",
		 5, "duplicate key accept_unsealed");
	load_err("[vad]\naccept_unsealed = yes\n", 2, "unknown key 'accept_unsealed' in [vad]");
}

/* The memory keys: backing = hugetlb, huge, commit, numa_node; their defaults and refusals. */
static void test_memory_keys(void **state)
{
	(void)state;
	struct vad_config cfg;
	load_ok("[arena plain]\nsize = 4M\n"
		"[arena r]\nsize = 4M\ncommit = reserve\nnuma_node = 0\nhuge = thp\n"
		"[arena i]\nsize = 4M\nnuma_node = interleave\ncommit = Touch\n",
		&cfg);
	assert_int_equal(cfg.n_arenas, 3);
	assert_int_equal(cfg.arenas[0].commit, VAD_COMMIT_TOUCH);
	assert_int_equal(cfg.arenas[0].numa, VAD_NUMA_NONE);
	assert_false(cfg.arenas[0].thp);
	assert_int_equal(cfg.arenas[0].hugetlb_page, 0);
	assert_int_equal(cfg.arenas[1].commit, VAD_COMMIT_RESERVE);
	assert_int_equal(cfg.arenas[1].numa, VAD_NUMA_NODE);
	assert_int_equal(cfg.arenas[1].numa_node, 0);
	assert_string_equal(cfg.arenas[1].numa_text, "node 0");
	assert_true(cfg.arenas[1].thp);
	assert_int_equal(cfg.arenas[2].numa, VAD_NUMA_INTERLEAVE);
	assert_string_equal(cfg.arenas[2].numa_text, "interleave");
	assert_int_equal(cfg.arenas[2].commit, VAD_COMMIT_TOUCH);
	vad_config_free(&cfg);
	if (access("/sys/kernel/mm/hugepages/hugepages-2048kB", F_OK) == 0) {
		load_ok("[arena h]\nsize = 8M\nbacking = hugetlb:2M\n", &cfg);
		assert_int_equal(cfg.arenas[0].hugetlb_page, 2u << 20);
		assert_int_equal(cfg.arenas[0].quantum, 2u << 20); /* the quantum's default */
		assert_string_equal(cfg.arenas[0].backing, "");
		vad_config_free(&cfg);
		load_err("[arena h]\nsize = 8M\nbacking = hugetlb\nquantum = 4K\n", 4,
			 "smaller than the huge page size 2.0 MiB of hugetlb");
		load_err("[arena h]\nsize = 8M\nbacking = hugetlb\nhuge = thp\n", 4,
			 "its pages are huge already");
	}
	load_err("[arena h]\nsize = 8M\nbacking = hugetlb:4M\n", 3, "must be 2M or 1G");
	load_err("[arena h]\nsize = 8M\nbacking = hugetlbx\n", 3, "expected memfd, hugetlb");
	load_err("[arena a]\nsize = 4M\ncommit = eager\n", 3, "commit = eager: expected touch");
	load_err("[arena a]\nsize = 4M\nhuge = yes\n", 3, "huge = yes: expected none or thp");
	load_err("[arena a]\nsize = 4M\nnuma_node = -1\n", 3, "expected none, interleave");
	load_err("[arena a]\nsize = 4M\nnuma_node = 1000\n", 3, "has no NUMA node 1000");
	load_err("[arena a]\nsize = 4M\nbacking = /tmp\naccept_unsealed = yes\nhuge = thp\n", 5,
		 "asked for on a memfd only");
}

/* Admission: hello_timeout, max_clients_uid and admin_slots, their defaults and refusals. */
static void test_admission_keys(void **state)
{
	(void)state;
	struct vad_config cfg;
	vad_config_defaults(&cfg);
	assert_int_equal(cfg.hello_timeout_ms, 10000);
	assert_int_equal(cfg.max_clients_uid, 128);
	assert_int_equal(cfg.admin_slots, 4);

	load_ok("[vad]\nhello_timeout = 1500ms\nmax_clients_uid = 7\nadmin_slots = 0\n", &cfg);
	assert_int_equal(cfg.hello_timeout_ms, 1500);
	assert_int_equal(cfg.max_clients_uid, 7);
	assert_int_equal(cfg.admin_slots, 0);
	vad_config_free(&cfg);
	load_ok("[vad]\nhello_timeout = 1m\nmax_clients_uid = unlimited\nadmin_slots = 32\n", &cfg);
	assert_int_equal(cfg.hello_timeout_ms, 60000);
	assert_int_equal(cfg.max_clients_uid, 0);
	assert_int_equal(cfg.admin_slots, 32);
	vad_config_free(&cfg);

	load_err("[vad]\nhello_timeout = 10ms\n", 2, "hello_timeout");
	load_err("[vad]\nhello_timeout = 2h\n", 2, "out of range");
	load_err("[vad]\nhello_timeout = soon\n", 2, "bad duration");
	load_err("[vad]\nhello_timeout =\n", 2, "hello_timeout");
	load_err("[vad]\n\nmax_clients_uid = 0\n", 3, "max_clients_uid");
	load_err("[vad]\nmax_clients_uid = -1\n", 2, "unlimited");
	load_err("[vad]\nmax_clients_uid = 2000000\n", 2, "max_clients_uid");
	load_err("[vad]\nadmin_slots = some\n", 2, "admin_slots");
	load_err("[vad]\nadmin_slots = 1\nadmin_slots = 2\n", 3, "duplicate key admin_slots");
	load_err("[arena a]\nsize = 1G\nhello_timeout = 1s\n", 3, "hello_timeout");
}

/* ---- max_ranges_client / max_ranges_uid ------------------------------------------------ */

static void test_range_limits(void **state)
{
	struct vad_config cfg;
	vad_config_defaults(&cfg);
	assert_int_equal(cfg.max_ranges_client, 1ull << 20);
	assert_int_equal(cfg.max_ranges_uid, 4ull << 20);
	assert_int_equal(settings_of("[vad]\nworkers = 2\n").max_ranges_client, 1ull << 20);
	assert_int_equal(settings_of("[vad]\nmax_ranges_client = 5000\n").max_ranges_client, 5000);
	assert_int_equal(settings_of("[vad]\nmax_ranges_uid = 1\n").max_ranges_uid, 1);
	assert_int_equal(settings_of("[vad]\nmax_ranges_uid = unlimited\n").max_ranges_uid, 0);
	assert_int_equal(settings_of("[vad]\nmax_ranges_client = Unlimited\n").max_ranges_client,
			 0);
	assert_int_equal(settings_of("[vad]\nmax_ranges_uid = 1099511627776\n").max_ranges_uid,
			 1ull << 40);
	load_err("[vad]\nmax_ranges_client = 0\n", 2, "max_ranges_client = 0: expected");
	load_err("[vad]\nmax_ranges_client = 1M\n", 2, "or \"unlimited\"");
	load_err("[vad]\nmax_ranges_uid = -1\n", 2, "max_ranges_uid = -1");
	load_err("[vad]\nmax_ranges_uid = 1099511627777\n", 2, "from 1 to 1099511627776");
	load_err("[arena a]\nsize = 1G\nmax_ranges_uid = 5\n", 3, "max_ranges_uid");
}

/* ---- max_waiters_client / max_waiters -------------------------------------------------- */

static void test_waiter_limits(void **state)
{
	struct vad_config cfg;
	vad_config_defaults(&cfg);
	assert_int_equal(cfg.max_waiters_client, 64);
	assert_int_equal(cfg.max_waiters, 4096);
	assert_int_equal(settings_of("[vad]\nmax_waiters_client = 0\n").max_waiters_client, 0);
	assert_int_equal(settings_of("[vad]\nmax_waiters = 100000\n").max_waiters, 100000);
	load_err("[vad]\nmax_waiters = 1048577\n", 2, "max_waiters = 1048577");
	load_err("[vad]\nmax_waiters_client = -1\n", 2, "max_waiters_client = -1");
	load_err("[arena a]\nsize = 1G\nmax_waiters = 5\n", 3, "max_waiters");
}

/* Every [vad] key written with its default text parses, and to the value the defaults hold. */
static void test_every_key_parses_its_default(void **state)
{
	(void)state;
	struct vad_config dflt;
	vad_config_defaults(&dflt);
	assert_true(vad_config_key_count() >= 22);
	for (size_t i = 0; i < vad_config_key_count(); i++) {
		const char *name = vad_config_key_name(i);
		const char *text = vad_config_key_default(i);
		assert_non_null(name);
		if (!text)
			continue; /* no default: the key stays unset */
		char conf[256], want[64], got[64];
		snprintf(conf, sizeof(conf), "[vad]\n%s = %s\n", name, text);
		struct vad_config cfg;
		load_ok(conf, &cfg);
		vad_config_key_text(&dflt, i, want, sizeof(want));
		vad_config_key_text(&cfg, i, got, sizeof(got));
		if (strcmp(want, got) != 0)
			fail_msg("%s = %s gives %s, the defaults hold %s", name, text, got, want);
		vad_config_free(&cfg);
	}
	assert_null(vad_config_key_name(vad_config_key_count()));
}

/* The reload summary names each key a reload applies, in table order, and no other. */
static void test_reloadable_text(void **state)
{
	(void)state;
	struct vad_config cfg;
	vad_config_defaults(&cfg);
	char text[1024], want[1024] = "";
	vad_config_reloadable_text(&cfg, text, sizeof(text));
	for (size_t i = 0; i < vad_config_key_count(); i++) {
		if (!vad_config_key_reloadable(i))
			continue;
		char value[64];
		size_t used = strlen(want);
		snprintf(want + used, sizeof(want) - used, "%s%s %s", used ? ", " : "",
			 vad_config_key_name(i),
			 vad_config_key_text(&cfg, i, value, sizeof(value)));
	}
	assert_string_equal(text, want);
	assert_non_null(strstr(text, "max_frame 64 KiB, max_clients 1024, max_batch 1024, "
				     "quota_client unlimited, quota_uid unlimited"));
	assert_non_null(strstr(text, "log_level info, hello_timeout 10000 ms"));
	assert_null(strstr(text, "socket"));
	assert_null(strstr(text, "workers"));
	assert_null(strstr(text, "stats_interval"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_builtin_defaults_get_default_arena),
	    cmocka_unit_test(test_file_without_arena_gets_default),
	    cmocka_unit_test(test_every_key),
	    cmocka_unit_test(test_spellings),
	    cmocka_unit_test(test_parse_size),
	    cmocka_unit_test(test_parse_duration),
	    cmocka_unit_test(test_format_size),
	    cmocka_unit_test(test_log_level_names),
	    cmocka_unit_test(test_errors_vad_section),
	    cmocka_unit_test(test_errors_arena_section),
	    cmocka_unit_test(test_error_line_too_long),
	    cmocka_unit_test(test_missing_file),
	    cmocka_unit_test(test_readers),
	    cmocka_unit_test(test_tenancy),
	    cmocka_unit_test(test_trailing_comments),
	    cmocka_unit_test(test_load_free_load),
	    cmocka_unit_test(test_shipped_config),
	    cmocka_unit_test(test_balance_default_is_adaptive),
	    cmocka_unit_test(test_balance_values),
	    cmocka_unit_test(test_balance_refusals),
	    cmocka_unit_test(test_spread_idle_values),
	    cmocka_unit_test(test_spread_idle_refusals),
	    cmocka_unit_test(test_accept_unsealed),
	    cmocka_unit_test(test_memory_keys),
	    cmocka_unit_test(test_admission_keys),
	    cmocka_unit_test(test_range_limits),
	    cmocka_unit_test(test_waiter_limits),
	    cmocka_unit_test(test_every_key_parses_its_default),
	    cmocka_unit_test(test_reloadable_text),
	    cmocka_unit_test(test_every_error_reported),
	    cmocka_unit_test(test_many_errors_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
