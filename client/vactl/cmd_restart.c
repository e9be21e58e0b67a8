/* cmd_restart.c - vactl restart: the daemon re-executes itself in place, keeping the ranges. */
#include <stdio.h>
#include <stdlib.h>

#include "vactl.h"

static int run_restart(struct vactl_opts *o, int argc, char **argv)
{
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_restart, o, argc, argv, 0, &first, &c, &rc))
		return rc;
	char *detail = NULL;
	int err = vad_restart(c, &detail);
	if (err)
		return vactl_report_close(o, c, err);
	if (o->json) {
		json_object *j = json_object_new_object();
		json_object_object_add(j, "restarting", json_object_new_boolean(1));
		vactl_json_add_str(j, "detail", detail);
		vactl_json_print(j);
	} else {
		puts(detail);
	}
	free(detail);
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_restart = {
    .name = "restart",
    .args = "",
    .summary = "re-execute the daemon in place, keeping every live range (admin)",
    .help = "Asks the daemon to stop politely and re-execute itself (the same pid, the\n"
	    "binary now installed) with its arenas and state file, as SIGUSR2 does: live\n"
	    "ranges, their holders and data survive; connections are closed and clients\n"
	    "reconnect. Sessions that do not come back within resume_grace lose their\n"
	    "holds. Admin only.\n"
	    "JSON: {restarting: true, detail}\n",
    .run = run_restart,
};
