/* live.c - --interval and --count for vactl's live views. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "live.h"

int vactl_live_opt(const struct vactl_cmd *cmd, struct vactl_live *l, int opt, const char *arg)
{
	char *end;
	switch (opt) {
	case VACTL_OPT_INTERVAL:
		if (vactl_parse_duration(arg, &l->interval_ms) < 0 || l->interval_ms == 0)
			return vactl_usage_error(cmd, "bad interval '%s' (try 1s, 500ms)", arg);
		return VACTL_EXIT_OK;
	case VACTL_OPT_COUNT:
		errno = 0;
		/* strtoull takes "-1" as 2^64-1: only digits may start it */
		l->count = isdigit((unsigned char)arg[0]) ? strtoull(arg, &end, 10) : 0;
		if (!l->count || errno || *end)
			return vactl_usage_error(
			    cmd,
			    "bad count '%s': --count is the number of refreshes, "
			    "1 or more (leave it out to run until stopped)",
			    arg);
		return VACTL_EXIT_OK;
	}
	return VACTL_EXIT_USAGE;
}
