/* log.c - leveled logging to stderr; see log.h.
 *
 * When stderr is the journal (systemd names its stream in JOURNAL_STREAM as DEVICE:INODE, and
 * stderr's fstat is that one), each line starts with a "<N>" priority prefix that journald
 * turns into the message priority. Anywhere else (a terminal, a file, a pipe, also a child
 * of a service that inherited the variable but writes elsewhere) the level is spelled out. Each
 * line is formatted into one buffer and written with one write(2), so lines from different threads
 * never interleave.
 */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_LINE_MAX 4096

static int log_level = VAD_LOG_INFO;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static bool log_prefix_priority; /* "<6>" style, decided once */

bool vad_log_stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	int end = 0;
	struct stat st;
	if (!js || sscanf(js, "%llu:%llu%n", &dev, &ino, &end) != 2 || js[end] ||
	    fstat(STDERR_FILENO, &st) != 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

bool vad_log_under_systemd(void)
{
	const char *id = getenv("INVOCATION_ID"); /* set for every unit's processes */
	return (id && *id) || vad_log_stderr_is_journal();
}

static void log_detect_style(void)
{
	log_prefix_priority = vad_log_stderr_is_journal();
}

void vad_log_set_level(int level)
{
	if (level < VAD_LOG_ERR)
		level = VAD_LOG_ERR;
	if (level > VAD_LOG_DEBUG)
		level = VAD_LOG_DEBUG;
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

static const struct {
	const char *name;
	int level;
} level_names[] = {
    {"err", VAD_LOG_ERR},      {"error", VAD_LOG_ERR},	   {"warning", VAD_LOG_WARNING},
    {"warn", VAD_LOG_WARNING}, {"notice", VAD_LOG_NOTICE}, {"info", VAD_LOG_INFO},
    {"debug", VAD_LOG_DEBUG},
};

int vad_log_level_from_name(const char *name)
{
	if (!name)
		return -1;
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (strcasecmp(name, level_names[i].name) == 0)
			return level_names[i].level;
	/* syslog numbers 3..7 as well, for people who think in priorities */
	if (name[0] >= '3' && name[0] <= '7' && name[1] == '\0')
		return name[0] - '0';
	return -1;
}

const char *vad_log_level_name(int level)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (level_names[i].level == level)
			return level_names[i]
			    .name; /* the first spelling of each level is its name */
	return "?";
}

static const char *level_word(int level)
{
	switch (level) {
	case VAD_LOG_ERR:
		return "error";
	case VAD_LOG_WARNING:
		return "warning";
	case VAD_LOG_NOTICE:
		return "notice";
	case VAD_LOG_INFO:
		return "info";
	default:
		return "debug";
	}
}

int vad_log_enabled(int level)
{
	return level <= __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

void vad_log(int level, const char *fmt, ...)
{
	if (level > __atomic_load_n(&log_level, __ATOMIC_RELAXED))
		return;
	int saved_errno = errno; /* callers may log and then still inspect errno */
	pthread_once(&log_once, log_detect_style);

	char line[LOG_LINE_MAX];
	int n;
	if (log_prefix_priority)
		n = snprintf(line, sizeof(line), "<%d>vad: ", level);
	else
		n = snprintf(line, sizeof(line), "vad: %s: ", level_word(level));
	size_t pos = (size_t)n;

	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + pos, sizeof(line) - pos - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	size_t end = pos + (size_t)m;
	if (end > sizeof(line) - 2) {
		/* truncated: say so rather than cut a word silently */
		end = sizeof(line) - 2;
		memcpy(line + end - 3, "...", 3);
	}
	/* one message, one line: journald would split embedded newlines into entries */
	for (size_t i = pos; i < end; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[end++] = '\n';

	const char *p = line;
	while (end > 0) {
		ssize_t w = write(STDERR_FILENO, p, end);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			break; /* nowhere left to report a logging failure */
		}
		p += w;
		end -= (size_t)w;
	}
	errno = saved_errno;
}

/* The escaped form of byte c in e (at most 4 characters); returns its length. */
static size_t escape_byte(unsigned char c, char *e)
{
	static const char hex[] = "0123456789abcdef";
	if (c == '\n' || c == '\r' || c == '\t' || c == '\\' || c == '\'' || c == '"') {
		e[0] = '\\';
		e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : (char)c;
		return 2;
	}
	if (c < 0x20 || c > 0x7e) {
		e[0] = '\\';
		e[1] = 'x';
		e[2] = hex[c >> 4];
		e[3] = hex[c & 15];
		return 4;
	}
	e[0] = (char)c;
	return 1;
}

const char *vad_escape(const char *s, char *buf, size_t cap)
{
	if (!buf || cap == 0)
		return buf;
	if (!s)
		s = "";
	char e[4];
	/* Does the whole string fit? Then no "..." needs room. */
	size_t whole = 0, len = 0;
	for (; s[len] && len <= VAD_ESCAPE_SHOWN; len++)
		whole += escape_byte((unsigned char)s[len], e);
	bool cut = len > VAD_ESCAPE_SHOWN || whole > cap - 1;
	size_t room = cut ? (cap - 1 > 3 ? cap - 1 - 3 : 0) : cap - 1;
	size_t o = 0;
	for (size_t i = 0; s[i] && i < VAD_ESCAPE_SHOWN; i++) {
		size_t n = escape_byte((unsigned char)s[i], e);
		if (o + n > room)
			break;
		memcpy(buf + o, e, n);
		o += n;
	}
	if (cut) {
		size_t dots = cap - 1 - o < 3 ? cap - 1 - o : 3;
		memcpy(buf + o, "...", dots);
		o += dots;
	}
	buf[o] = '\0';
	return buf;
}
