/* cmd_metrics.c - vactl metrics: the daemon's Prometheus text, as its HTTP /metrics serves it. */
#include <stdio.h>
#include <stdlib.h>

#include "output.h"
#include "vactl.h"

static int run_metrics(struct vactl_opts *o, int argc, char **argv)
{
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_metrics, o, argc, argv, 0, &first, &c, &rc))
		return rc;
	char *text = NULL;
	int err = vad_metrics(c, &text);
	if (err)
		return vactl_report_close(o, c, err);
	if (o->json) {
		json_object *j = json_object_new_object();
		vactl_json_add_str(j, "text", text);
		vactl_json_print(j);
	} else {
		fputs(text, stdout);
	}
	free(text);
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_metrics = {
    .name = "metrics",
    .args = "",
    .summary = "print the daemon's metrics in the Prometheus text format",
    .help = "Prints what the daemon's HTTP /metrics serves (metrics_listen in vad.conf),\n"
	    "through the socket: build info, sessions, per-arena bytes and counters, errors\n"
	    "by code, a latency histogram per operation in seconds. Like stats, it shows the\n"
	    "arenas you may use (every tenant arena to an admin); the daemon-wide counters to\n"
	    "everyone. Refused (ETOOBIG) when the text does not fit the daemon's max_frame.\n"
	    "JSON: {text}\n",
    .run = run_metrics,
};
