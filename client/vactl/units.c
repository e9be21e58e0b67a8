/* units.c - human units in arguments (4K, 1.5M, 10s) and in output (1.0 GiB, 2h 03m). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vactl.h"

/* Parse a non-negative decimal number, digits with an optional fraction (no sign, no
 * exponent, no hex); *end after it. */
static int parse_number(const char *s, double *out, const char **end)
{
	const char *p = s;
	while (isdigit((unsigned char)*p))
		p++;
	size_t int_digits = (size_t)(p - s);
	size_t frac_digits = 0;
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)p[frac_digits]))
			frac_digits++;
		p += frac_digits;
	}
	if (int_digits + frac_digits == 0 || int_digits > 20)
		return -1;
	char buf[64];
	if ((size_t)(p - s) >= sizeof(buf))
		return -1;
	memcpy(buf, s, (size_t)(p - s));
	buf[p - s] = '\0';
	errno = 0;
	double v = strtod(buf, NULL);
	if (errno || !isfinite(v))
		return -1;
	*out = v;
	*end = p;
	return 0;
}

int vactl_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "BKMGTPE";
	if (!s)
		return -1;
	/* Plain integers are exact; doubles would lose bytes past 2^53. */
	char *e;
	errno = 0;
	if (isdigit((unsigned char)*s)) {
		unsigned long long v = strtoull(s, &e, 10);
		if (!errno && *e == '\0') {
			*out = v;
			return 0;
		}
	}
	double v;
	const char *rest;
	if (parse_number(s, &v, &rest) < 0)
		return -1;
	double mult = 1;
	if (*rest) {
		const char *u = strchr(units, toupper((unsigned char)*rest));
		if (!u)
			return -1;
		mult = ldexp(1.0, 10 * (int)(u - units));
		rest++;
		if (strcasecmp(rest, "") != 0 && strcasecmp(rest, "B") != 0 &&
		    strcasecmp(rest, "iB") != 0)
			return -1;
		if (u == units && *rest) /* "4BB" */
			return -1;
	}
	double bytes = v * mult;
	if (bytes >= 18446744073709551616.0 || bytes != floor(bytes))
		return -1;
	*out = (uint64_t)bytes;
	return 0;
}

int vactl_parse_duration(const char *s, uint64_t *ms)
{
	if (!s)
		return -1;
	double v;
	const char *rest;
	if (parse_number(s, &v, &rest) < 0)
		return -1;
	double mult;
	if (*rest == '\0' || strcmp(rest, "s") == 0)
		mult = 1000;
	else if (strcmp(rest, "ms") == 0)
		mult = 1;
	else if (strcmp(rest, "m") == 0 || strcmp(rest, "min") == 0)
		mult = 60e3;
	else if (strcmp(rest, "h") == 0)
		mult = 3600e3;
	else if (strcmp(rest, "d") == 0)
		mult = 86400e3;
	else
		return -1;
	double r = v * mult;
	if (r >= 9.2e18)
		return -1;
	*ms = (uint64_t)llround(r);
	return 0;
}

const char *vactl_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	double v = (double)bytes;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (v >= 100)
		snprintf(buf, len, "%.0f %s", v, units[u]);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
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
