/* cmd_admin.c - admin operations: purge, reload, check. */
#include <stdio.h>
#include <stdlib.h>

#include "vactl.h"

static int parse_operands(const struct vactl_cmd *cmd, struct vactl_opts *o, int argc, char **argv,
			  int max_args, int *first)
{
	int rc = vactl_parse_cmd(cmd, o, argc, argv, NULL, NULL, NULL, NULL, first);
	if (rc != VACTL_EXIT_OK)
		return rc;
	if (argc - *first > max_args)
		return vactl_usage_error(cmd, "unexpected argument '%s'", argv[*first + max_args]);
	return VACTL_EXIT_OK;
}

static int run_purge(struct vactl_opts *o, int argc, char **argv)
{
	int first;
	int rc = parse_operands(&vactl_cmd_purge, o, argc, argv, 1, &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	const char *arena = first < argc ? argv[first] : NULL;
	vad_client *c;
	if ((rc = vactl_connect(o, &c)))
		return rc;
	uint64_t released = 0;
	int err = vad_purge_arena(c, arena, &released);
	if (err) {
		rc = vactl_report(o, c, err);
		vad_close(c);
		return rc;
	}
	if (o->json) {
		json_object *j = json_object_new_object();
		vactl_json_add_str(j, "arena", arena);
		vactl_json_add_u64(j, "released_bytes", released);
		vactl_json_print(j);
	} else {
		char b[32];
		printf("purged %s: released %s (%llu bytes) to the system\n",
		       arena ? arena : "every arena", vactl_fmt_size(released, b, sizeof(b)),
		       (unsigned long long)released);
	}
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_purge = {
    .name = "purge",
    .args = "[ARENA]",
    .summary = "reclaim lazy and pooled memory now (admin)",
    .help = "Makes the daemon reclaim every freed-but-lazy range and empty its per-node\n"
	    "pools at once, in ARENA or in every arena. Admin only.\n"
	    "JSON: {arena (null = all), released_bytes}\n",
    .run = run_purge,
};

static int run_reload(struct vactl_opts *o, int argc, char **argv)
{
	int first;
	int rc = parse_operands(&vactl_cmd_reload, o, argc, argv, 0, &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	vad_client *c;
	if ((rc = vactl_connect(o, &c)))
		return rc;
	char *detail = NULL;
	int err = vad_reload_detail(c, &detail);
	if (err) {
		rc = vactl_report(o, c, err);
		vad_close(c);
		return rc;
	}
	if (o->json) {
		json_object *j = json_object_new_object();
		json_object_object_add(j, "reloaded", json_object_new_boolean(1));
		vactl_json_add_str(j, "detail", detail);
		vactl_json_print(j);
	} else {
		printf("reloaded%s%s\n", detail && *detail ? ": " : "", detail ? detail : "");
	}
	free(detail);
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_reload = {
    .name = "reload",
    .args = "",
    .summary = "re-read the configuration's limits, like SIGHUP (admin)",
    .help = "Asks the daemon to re-read its config file and apply the reloadable limits\n"
	    "(quotas, max clients, max frame and batch, log level). Admin only.\n"
	    "JSON: {reloaded: true, detail}\n",
    .run = run_reload,
};

static int run_check(struct vactl_opts *o, int argc, char **argv)
{
	int first;
	int rc = parse_operands(&vactl_cmd_check, o, argc, argv, 0, &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	vad_client *c;
	if ((rc = vactl_connect(o, &c)))
		return rc;
	int ok = 0;
	char *detail = NULL;
	int err = vad_check(c, &ok, &detail);
	if (err) {
		rc = vactl_report(o, c, err);
		vad_close(c);
		return rc;
	}
	if (o->json) {
		json_object *j = json_object_new_object();
		json_object_object_add(j, "ok", json_object_new_boolean(ok));
		vactl_json_add_str(j, "detail", detail);
		vactl_json_print(j);
	} else if (ok) {
		printf("ok%s%s\n", detail && *detail ? ": " : "", detail ? detail : "");
	} else {
		printf("CORRUPT: %s\n", detail && *detail ? detail : "(no detail)");
		fprintf(stderr, "vactl: check found broken allocator invariants\n");
	}
	free(detail);
	vad_close(c);
	return ok ? VACTL_EXIT_OK : VACTL_EXIT_CORRUPT;
}

const struct vactl_cmd vactl_cmd_check = {
    .name = "check",
    .args = "",
    .summary = "check allocator invariants (admin; exit 4 if broken)",
    .help = "Runs the allocator's invariant checker (tree order and colour, subtree maxima,\n"
	    "no overlap, busy + free + lazy + pooled = size) on every arena. Admin only.\n"
	    "Exits 0 when every arena is sound and 4 when any is not.\n"
	    "JSON: {ok, detail}\n",
    .run = run_check,
};
