/* log.h - leveled logging to stderr: "<N>" priority prefixes for the journal, the level in
 * words anywhere else. */
#ifndef VAD_LOG_H
#define VAD_LOG_H

#include <stdbool.h>
#include <stddef.h>

enum vad_log_level {
	VAD_LOG_ERR = 3,
	VAD_LOG_WARNING = 4,
	VAD_LOG_NOTICE = 5,
	VAD_LOG_INFO = 6,
	VAD_LOG_DEBUG = 7
};

/* Is stderr the journal's stream ($JOURNAL_STREAM names stderr's device and inode)? */
bool vad_log_stderr_is_journal(void);

/* Does systemd run this process ($INVOCATION_ID set, or stderr is the journal)? */
bool vad_log_under_systemd(void);

/* Messages above this level are dropped; default VAD_LOG_INFO. */
void vad_log_set_level(int level);

/* Parse "err", "warning", "notice", "info", "debug"; -1 if unknown. */
int vad_log_level_from_name(const char *name);

/* The name vad_log_level_from_name reads for level ("err" ... "debug"), "?" if none. */
const char *vad_log_level_name(int level);

/* Would a line at level be written (the level is at or above the current one)? */
int vad_log_enabled(int level);

/* Log one line at the given level (printf format); thread-safe, one write per line. */
void vad_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Input bytes vad_escape shows before it cuts with "..." (client names are short). */
#define VAD_ESCAPE_SHOWN 64

/* A buffer that holds vad_escape of any string: 4 characters per byte shown, "...", NUL. */
#define VAD_ESCAPE_BUF (VAD_ESCAPE_SHOWN * 4 + 4)

/* A client-supplied string (NULL: "") as printable ASCII, for error replies and log lines:
 * \n \r \t \\ \' \" and \xNN for every other byte outside 0x20-0x7e (escape bytes,
 * invalid UTF-8), at most VAD_ESCAPE_SHOWN bytes and never more than cap - 1 characters, cut
 * with "..." when longer. Returns buf. */
const char *vad_escape(const char *s, char *buf, size_t cap);

#define log_err(...)	vad_log(VAD_LOG_ERR, __VA_ARGS__)
#define log_warn(...)	vad_log(VAD_LOG_WARNING, __VA_ARGS__)
#define log_notice(...) vad_log(VAD_LOG_NOTICE, __VA_ARGS__)
#define log_info(...)	vad_log(VAD_LOG_INFO, __VA_ARGS__)
#define log_debug(...)	vad_log(VAD_LOG_DEBUG, __VA_ARGS__)

#endif
