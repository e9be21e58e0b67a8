/* units.c - human sizes and durations ("64G", "1.5M", "250ms", "30d"); see units.h. */
#include "units.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

struct unit {
	const char *suffix;
	uint64_t mult;
};

/* Binary multiples only: "K" and "KB" both mean 1024 here, as in every other size of vad. */
static const struct unit size_units[] = {
    {"", 1ull},		 {"b", 1ull},	      {"k", 1ull << 10},   {"kb", 1ull << 10},
    {"kib", 1ull << 10}, {"m", 1ull << 20},   {"mb", 1ull << 20},  {"mib", 1ull << 20},
    {"g", 1ull << 30},	 {"gb", 1ull << 30},  {"gib", 1ull << 30}, {"t", 1ull << 40},
    {"tb", 1ull << 40},	 {"tib", 1ull << 40}, {"p", 1ull << 50},   {"pb", 1ull << 50},
    {"pib", 1ull << 50}, {"e", 1ull << 60},   {"eb", 1ull << 60},  {"eib", 1ull << 60},
    {NULL, 0},
};

/* Durations in milliseconds; a bare number means seconds. */
static const struct unit duration_units[] = {
    {"", 1000ull},
    {"ms", 1ull},
    {"s", 1000ull},
    {"sec", 1000ull},
    {"m", 60ull * 1000},
    {"min", 60ull * 1000},
    {"h", 3600ull * 1000},
    {"d", 86400ull * 1000},
    {"w", 7ull * 86400 * 1000},
    {NULL, 0},
};

/* Parse "<digits>[.<digits>][ ]<suffix>" exactly; the result must be a whole number of units
 * of the table's base (bytes, milliseconds) and fit in 64 bits. */
static int parse_scaled(const char *s, const struct unit *units, uint64_t *out)
{
	if (!s || !out)
		return -1;
	const char *p = s;
	unsigned __int128 whole = 0, frac = 0, frac_scale = 1;
	int digits = 0;

	while (*p >= '0' && *p <= '9') {
		whole = whole * 10 + (unsigned)(*p - '0');
		if (whole > UINT64_MAX)
			return -1;
		p++;
		digits++;
	}
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (frac_scale >= 1000000000000000000ull)
				return -1; /* more precision than any unit can use */
			frac = frac * 10 + (unsigned)(*p - '0');
			frac_scale *= 10;
			p++;
			digits++;
		}
	}
	if (digits == 0)
		return -1;
	while (*p == ' ' || *p == '\t')
		p++;

	for (const struct unit *u = units; u->suffix; u++) {
		if (strcasecmp(p, u->suffix) != 0)
			continue;
		unsigned __int128 v = whole * u->mult;
		unsigned __int128 f = frac * u->mult;
		if (f % frac_scale != 0)
			return -1; /* "1.1K" is not a whole number of bytes */
		v += f / frac_scale;
		if (v > UINT64_MAX)
			return -1;
		*out = (uint64_t)v;
		return 0;
	}
	return -1;
}

int vad_parse_size(const char *s, uint64_t *out)
{
	return parse_scaled(s, size_units, out);
}

int vad_parse_duration_ms(const char *s, uint64_t *out)
{
	return parse_scaled(s, duration_units, out);
}

const char *vad_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (!buf || len == 0)
		return buf;
	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	unsigned i = 0;
	uint64_t unit = 1;
	while (i + 1 < sizeof(names) / sizeof(names[0]) && bytes / unit >= 1024) {
		unit <<= 10;
		i++;
	}
	if (bytes % unit == 0 && bytes / unit >= 10) {
		snprintf(buf, len, "%llu %s", (unsigned long long)(bytes / unit), names[i]);
		return buf;
	}
	/* One decimal below ten units ("1.5 GiB"), whole units above ("512 KiB"), rounded to
	 * nearest; "1024.0 KiB" is never printed because rounding up moves to the next unit. */
	double v = (double)bytes / (double)unit;
	if (v < 9.95)
		snprintf(buf, len, "%.1f %s", v, names[i]);
	else if (v < 1023.5 || i + 1 == sizeof(names) / sizeof(names[0]))
		snprintf(buf, len, "%.0f %s", v, names[i]);
	else
		snprintf(buf, len, "1.0 %s", names[i + 1]);
	return buf;
}
