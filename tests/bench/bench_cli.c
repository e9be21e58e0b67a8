/*
 * bench_cli.c - command-line and output helpers of vabench's front ends.
 */
#include <errno.h>
#include <stdlib.h>

#include "bench_cli.h"

int bench_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	if (!*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 0);
	if (errno)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	default:
		break;
	}
	if (shift)
		end++;
	if (*end || (shift && v > (~0ull >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

void bench_put_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

int bench_cli_check_value(int rc, const char *name, const char *value)
{
	if (!rc)
		return 0;
	fprintf(stderr, "vabench: bad value for --%s: %s\n", name, value);
	return 2;
}

int bench_cli_no_operands(int argc, char **argv, int optind_now)
{
	if (optind_now >= argc)
		return 0;
	fprintf(stderr, "vabench: unexpected argument '%s'\n", argv[optind_now]);
	return 2;
}
