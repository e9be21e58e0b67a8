/* units.c - human units in arguments (4K, 1.5M, 10s) and in output (1.0 GiB, 2h 03m): the
 * rules are proto/units.c's, the same as vad.conf's; only durations are formatted here. */
#include <stdio.h>

#include "units.h"
#include "vactl.h"

int vactl_parse_size(const char *s, uint64_t *out)
{
	return vad_parse_size(s, out);
}

int vactl_parse_duration(const char *s, uint64_t *ms)
{
	return vad_parse_duration_ms(s, ms);
}

const char *vactl_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	return vad_format_size(bytes, buf, len);
}

const char *vactl_fmt_duration(uint64_t ms, char *buf, size_t len)
{
	unsigned long long s = ms / 1000;
	if (ms < 1000)
		snprintf(buf, len, "%llums", (unsigned long long)ms);
	else if (s < 60)
		snprintf(buf, len, "%.1fs", (double)ms / 1000);
	else if (s < 3600)
		snprintf(buf, len, "%llum %02llus", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%lluh %02llum", s / 3600, s / 60 % 60);
	else
		snprintf(buf, len, "%llud %02lluh", s / 86400, s / 3600 % 24);
	return buf;
}

const char *vactl_fmt_ns(uint64_t ns, char *buf, size_t len)
{
	if (!ns)
		snprintf(buf, len, "-");
	else if (ns < 1000)
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.1fus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.1fms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2fs", (double)ns / 1e9);
	return buf;
}
