/*
 * units.h - human sizes, durations and counts, one set of rules for vad.conf (the daemon) and
 * vactl's arguments and output: "64G", "1.5 MiB", "4kb", "250ms", "10 sec", "1w".
 *
 * Sizes use binary multiples only ("K", "KB" and "KiB" all mean 1024); a value must be a
 * whole number of bytes (or milliseconds) and fit in 64 bits. One space or tab may sit
 * between the number and its unit, so what vad_format_size prints parses back.
 */
#ifndef VAD_UNITS_H
#define VAD_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "4096", "4K", "64G", "1.5M", "4 KiB", "4kb" -> bytes; -1 on junk or overflow. */
int vad_parse_size(const char *s, uint64_t *out);

/* "250ms", "10s", "10 sec", "5m", "5min", "2h", "30d", "1w", bare number = seconds ->
 * milliseconds; -1 on junk, a fraction of a millisecond or overflow. */
int vad_parse_duration_ms(const char *s, uint64_t *out);

/* Format bytes as "1.0 GiB", "64 GiB", "512 KiB", "17 B" into buf (cut to len). */
const char *vad_format_size(uint64_t bytes, char *buf, size_t len);

/* The plural ending of a count's noun in English messages: "%llu block%s", n, vad_plural(n)
 * reads "1 block", "0 blocks", "3 blocks" (every noun vad counts takes an "s"). */
static inline const char *vad_plural(unsigned long long n)
{
	return n == 1 ? "" : "s";
}

#endif
