/* test_daemon_log.c - log line format (journald prefix or terminal words), levels, one
 * write per line under concurrency. Each case runs in a child whose stderr is a pipe or a
 * pseudo-terminal, because the style is chosen once per process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

#define OUT_MAX (1 << 20)

/* journal: JOURNAL_STREAM naming the child's own stderr, as systemd sets it. */
#define JOURNAL_SELF "self"

/* Run fn in a child with stderr on a pipe (or a pty) and the given JOURNAL_STREAM (NULL:
 * unset); return everything it wrote, NUL-terminated (caller frees). */
static char *capture(void (*fn)(void), bool tty, const char *journal)
{
	int rfd, wfd;
	if (tty) {
		assert_int_equal(openpty(&rfd, &wfd, NULL, NULL, NULL), 0);
	} else {
		int p[2];
		assert_int_equal(pipe(p), 0);
		rfd = p[0];
		wfd = p[1];
	}
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(wfd, STDERR_FILENO);
		close(wfd);
		close(rfd);
		struct stat st;
		char self[64];
		if (journal && strcmp(journal, JOURNAL_SELF) == 0 &&
		    fstat(STDERR_FILENO, &st) == 0) {
			snprintf(self, sizeof(self), "%llu:%llu", (unsigned long long)st.st_dev,
				 (unsigned long long)st.st_ino);
			setenv("JOURNAL_STREAM", self, 1);
		} else if (journal)
			setenv("JOURNAL_STREAM", journal, 1);
		else
			unsetenv("JOURNAL_STREAM");
		fn();
		_exit(0);
	}
	close(wfd);
	char *out = malloc(OUT_MAX);
	assert_non_null(out);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(rfd, out + len, OUT_MAX - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) /* EOF, or EIO from a pty whose last writer is gone */
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(rfd);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return out;
}

static void log_some(void)
{
	vad_log_set_level(VAD_LOG_INFO);
	log_err("disk %s", "gone");
	log_warn("warned");
	log_notice("noticed");
	log_info("informed %d", 42);
	log_debug("not shown at info");
	vad_log_set_level(VAD_LOG_DEBUG);
	log_debug("shown at debug");
	vad_log_set_level(VAD_LOG_ERR);
	log_warn("not shown at err");
	log_err("still shown");
}

/* stderr is the journal's stream: priorities as "<N>" prefixes. */
static void test_journal_prefix_on_pipe(void **state)
{
	(void)state;
	char *out = capture(log_some, false, JOURNAL_SELF);
	assert_string_equal(out, "<3>vad: disk gone\n"
				 "<4>vad: warned\n"
				 "<5>vad: noticed\n"
				 "<6>vad: informed 42\n"
				 "<7>vad: shown at debug\n"
				 "<3>vad: still shown\n");
	free(out);
}

static void test_terminal_words(void **state)
{
	(void)state;
	char *out = capture(log_some, true, NULL);
	/* the pty turns "\n" into "\r\n" */
	assert_string_equal(out, "vad: error: disk gone\r\n"
				 "vad: warning: warned\r\n"
				 "vad: notice: noticed\r\n"
				 "vad: info: informed 42\r\n"
				 "vad: debug: shown at debug\r\n"
				 "vad: error: still shown\r\n");
	free(out);
}

/* A pipe or file that is not the journal (make run | tee, vad 2>log): words, no "<N>". */
static void test_words_on_plain_pipe(void **state)
{
	(void)state;
	char *out = capture(log_some, false, NULL);
	assert_string_equal(out, "vad: error: disk gone\n"
				 "vad: warning: warned\n"
				 "vad: notice: noticed\n"
				 "vad: info: informed 42\n"
				 "vad: debug: shown at debug\n"
				 "vad: error: still shown\n");
	free(out);
}

/* JOURNAL_STREAM inherited from a service (a shell started from one, a script that redirects
 * stderr) names another stream than stderr: words, on a terminal and on a pipe; and a value
 * that is not DEVICE:INODE is no journal either. */
static void test_journal_stream_of_another_stream(void **state)
{
	(void)state;
	static const char *const others[] = {"8:12345", "0:0", "garbage", "", "1:2:3"};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		for (int tty = 0; tty < 2; tty++) {
			char *out = capture(log_some, tty, others[i]);
			if (!strstr(out, "vad: info: informed 42") || strchr(out, '<'))
				fail_msg("JOURNAL_STREAM=%s, %s: %s", others[i],
					 tty ? "pty" : "pipe", out);
			free(out);
		}
	}
}

static void report_systemd(void)
{
	fprintf(stderr, "%s", vad_log_under_systemd() ? "systemd" : "shell");
}

/* Under systemd: INVOCATION_ID set (any unit), or stderr is the journal. */
static void test_under_systemd(void **state)
{
	(void)state;
	unsetenv("INVOCATION_ID");
	char *out = capture(report_systemd, false, NULL);
	assert_string_equal(out, "shell");
	free(out);
	out = capture(report_systemd, false, "8:12345");
	assert_string_equal(out, "shell");
	free(out);
	out = capture(report_systemd, false, JOURNAL_SELF);
	assert_string_equal(out, "systemd");
	free(out);
	setenv("INVOCATION_ID", "0123456789abcdef0123456789abcdef", 1);
	out = capture(report_systemd, true, NULL);
	assert_string_equal(out, "systemd");
	free(out);
	unsetenv("INVOCATION_ID");
}

static void log_awkward(void)
{
	log_info("two\nlines\rhere");
	char big[8192];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_info("%s", big);
	errno = ENOSPC;
	log_info("errno survives");
	if (errno != ENOSPC)
		_exit(3);
}

static void test_one_line_and_truncation(void **state)
{
	(void)state;
	char *out = capture(log_awkward, false, JOURNAL_SELF);
	char *nl = strchr(out, '\n');
	assert_non_null(nl);
	*nl = '\0';
	assert_string_equal(out, "<6>vad: two lines here");
	char *second = nl + 1;
	nl = strchr(second, '\n');
	assert_non_null(nl);
	size_t len = (size_t)(nl - second);
	assert_true(len < 8192);
	assert_memory_equal(nl - 3, "...", 3); /* cut, and says so */
	assert_string_equal(nl + 1, "<6>vad: errno survives\n");
	free(out);
}

#define THREADS 8
#define LINES	500

static void *log_thread(void *arg)
{
	long id = (long)(intptr_t)arg;
	for (int i = 0; i < LINES; i++)
		log_info("thread %ld line %d %s", id, i, "padding padding padding padding padding");
	return NULL;
}

static void log_concurrently(void)
{
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, log_thread, (void *)(intptr_t)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
}

static void test_lines_never_interleave(void **state)
{
	(void)state;
	char *out = capture(log_concurrently, false, JOURNAL_SELF);
	int next[THREADS] = {0};
	int lines = 0;
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		long id;
		int n;
		char pad[64];
		if (sscanf(line, "<6>vad: thread %ld line %d %63[a-z ]", &id, &n, pad) != 3 ||
		    id < 0 || id >= THREADS)
			fail_msg("mangled line: \"%s\"", line);
		assert_int_equal(n, next[id]); /* each thread's lines in its own order */
		assert_string_equal(pad, "padding padding padding padding padding");
		next[id]++;
		lines++;
	}
	assert_int_equal(lines, THREADS * LINES);
	free(out);
}

/* Client strings become printable ASCII, with every escape form and a bounded length. */
static void test_escape(void **state)
{
	(void)state;
	char buf[VAD_ESCAPE_BUF];
	assert_string_equal(vad_escape("plain name-1.2", buf, sizeof(buf)), "plain name-1.2");
	assert_string_equal(vad_escape(NULL, buf, sizeof(buf)), "");
	assert_string_equal(vad_escape("a\nb\rc\td", buf, sizeof(buf)), "a\\nb\\rc\\td");
	assert_string_equal(vad_escape("\x1b[31m\x7f", buf, sizeof(buf)), "\\x1b[31m\\x7f");
	assert_string_equal(vad_escape("\xff\xfe\xc3\xa9", buf, sizeof(buf)),
			    "\\xff\\xfe\\xc3\\xa9");
	assert_string_equal(vad_escape("it's \"q\" \\", buf, sizeof(buf)), "it\\'s \\\"q\\\" \\\\");

	/* At most VAD_ESCAPE_SHOWN bytes are shown, then "...". */
	char longer[3 * VAD_ESCAPE_SHOWN];
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	vad_escape(longer, buf, sizeof(buf));
	assert_int_equal(strlen(buf), VAD_ESCAPE_SHOWN + 3);
	assert_string_equal(buf + VAD_ESCAPE_SHOWN, "...");
	longer[VAD_ESCAPE_SHOWN] = '\0'; /* exactly the limit: whole, no dots */
	assert_string_equal(vad_escape(longer, buf, sizeof(buf)), longer);

	/* The worst case (every byte a \xNN) fits VAD_ESCAPE_BUF. */
	memset(longer, 0x01, sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	vad_escape(longer, buf, sizeof(buf));
	assert_int_equal(strlen(buf), 4 * VAD_ESCAPE_SHOWN + 3);

	/* A small buffer cuts at a whole escape and still says so. */
	char small[8];
	assert_string_equal(vad_escape("abcdefg", small, sizeof(small)), "abcdefg");
	assert_string_equal(vad_escape("abcdefgh", small, sizeof(small)), "abcd...");
	assert_string_equal(vad_escape("ab\x01"
				       "cdefgh",
				       small, sizeof(small)),
			    "ab...");
	for (size_t cap = 1; cap < sizeof(small); cap++) {
		vad_escape("\x01\x02\x03", small, cap);
		assert_true(strlen(small) < cap);
		for (const char *p = small; *p; p++)
			assert_true(*p >= 0x20 && *p < 0x7f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_journal_prefix_on_pipe),
	    cmocka_unit_test(test_terminal_words),
	    cmocka_unit_test(test_words_on_plain_pipe),
	    cmocka_unit_test(test_journal_stream_of_another_stream),
	    cmocka_unit_test(test_under_systemd),
	    cmocka_unit_test(test_one_line_and_truncation),
	    cmocka_unit_test(test_lines_never_interleave),
	    cmocka_unit_test(test_escape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
