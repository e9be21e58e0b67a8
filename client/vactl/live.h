/*
 * live.h - what vactl's live views (top, latency) share (live.c): the --interval and --count
 * options, checked the same way for both.
 */
#ifndef VACTL_LIVE_H
#define VACTL_LIVE_H

#include <stdint.h>

#include "vactl.h"

struct vactl_live {
	uint64_t interval_ms; /* between refreshes */
	uint64_t count;	      /* refreshes before exiting, 0: until stopped */
};

enum { VACTL_OPT_INTERVAL = 0x4000, VACTL_OPT_COUNT, VACTL_OPT_LIVE_END };

/* The getopt_long rows of --interval and --count, for a command's option table. */
#define VACTL_LIVE_OPTIONS                                                                         \
	{"interval", required_argument, NULL, VACTL_OPT_INTERVAL},                                 \
	{                                                                                          \
		"count", required_argument, NULL, VACTL_OPT_COUNT                                  \
	}

/* Take --interval D (a duration above 0) or --count N (N >= 1) into l: VACTL_EXIT_OK, a usage
 * error naming cmd, or VACTL_EXIT_USAGE without a message when opt is neither. */
int vactl_live_opt(const struct vactl_cmd *cmd, struct vactl_live *l, int opt, const char *arg);

#endif
