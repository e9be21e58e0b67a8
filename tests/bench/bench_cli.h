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

/* Inside a getopt_long loop, after an option's value was parsed with result rc: 0 if rc is 0,
 * else report "bad value for --name" on stderr and return 2 (the usage-error exit code). */
int bench_cli_check_value(int rc, const char *name, const char *value);

/* After a getopt_long loop: 0 if every argument was an option, else report the first
 * operand left over on stderr and return 2. */
int bench_cli_no_operands(int argc, char **argv, int optind_now);

/* Write s to f as a JSON string literal (quotes, backslashes and control bytes escaped). */
void bench_put_json_string(FILE *f, const char *s);

#endif
