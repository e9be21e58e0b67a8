/* top_latency.c - vactl top's latency pane. */
#include <stdio.h>

#include "top.h"

void top_latency_pane(struct vactl_fit **t, char *note, size_t len, const struct top_samples *s)
{
	(void)s;
	*t = NULL;
	snprintf(note, len, "LATENCY: this daemon reports no per-operation latency");
}
