/* log.h - leveled logging to stderr with journald-friendly "<N>" priority prefixes. */
#ifndef VAD_LOG_H
#define VAD_LOG_H

enum vad_log_level { VAD_LOG_ERR = 3, VAD_LOG_WARNING = 4, VAD_LOG_NOTICE = 5, VAD_LOG_INFO = 6, VAD_LOG_DEBUG = 7 };

/* Messages above this level are dropped; default VAD_LOG_INFO. */
void vad_log_set_level(int level);

/* Parse "err", "warning", "notice", "info", "debug"; -1 if unknown. */
int vad_log_level_from_name(const char *name);

/* Log one line at the given level (printf format); thread-safe, one write per line. */
void vad_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) vad_log(VAD_LOG_ERR, __VA_ARGS__)
#define log_warn(...) vad_log(VAD_LOG_WARNING, __VA_ARGS__)
#define log_notice(...) vad_log(VAD_LOG_NOTICE, __VA_ARGS__)
#define log_info(...) vad_log(VAD_LOG_INFO, __VA_ARGS__)
#define log_debug(...) vad_log(VAD_LOG_DEBUG, __VA_ARGS__)

#endif
