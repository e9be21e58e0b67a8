/*
 * bench_cli.h - command-line and output helpers of vabench's two front ends.
 *
 * vabench.c (the library bench) and daemon_main.c / daemon_stats.c (the --daemon bench)
 * share them.
 */
#ifndef BENCH_CLI_H
#define BENCH_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Parse a non-negative integer with an optional K/M/G/T suffix (powers of 1024) into
 * *out; returns 0, or -1 on junk or overflow (then *out is unchanged). */
int bench_parse_u64(const char *s, uint64_t *out);

/* Write s to f as a JSON string literal (quotes, backslashes and control bytes escaped). */
void bench_put_json_string(FILE *f, const char *s);

#endif
