/* cmd_admin.c - admin operations: purge, reload, check. */
#include <stdio.h>
#include <stdlib.h>

#include "vactl.h"

/* Print "WORD" or "WORD: DETAIL" (no colon for an empty detail). */
static void print_with_detail(const char *word, const char *detail)
{
	printf("%s%s%s\n", word, detail && *detail ? ": " : "", detail ? detail : "");
}

/* Print {key: flag, detail} as the JSON document. */
static void print_flag_json(const char *key, bool flag, const char *detail)
{
	json_object *j = json_object_new_object();
	json_object_object_add(j, key, json_object_new_boolean(flag));
	vactl_json_add_str(j, "detail", detail);
	vactl_json_print(j);
}

static int run_purge(struct vactl_opts *o, int argc, char **argv)
{
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_purge, o, argc, argv, 1, &first, &c, &rc))
		return rc;
	const char *arena = first < argc ? argv[first] : NULL;
	uint64_t released = 0;
	int err = vad_purge_arena(c, arena, &released);
	if (err)
		return vactl_report_close(o, c, err);
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
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_reload, o, argc, argv, 0, &first, &c, &rc))
		return rc;
	char *detail = NULL;
	int err = vad_reload_detail(c, &detail);
	if (err)
		return vactl_report_close(o, c, err);
	if (o->json)
		print_flag_json("reloaded", true, detail);
	else
		print_with_detail("reloaded", detail);
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
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_check, o, argc, argv, 0, &first, &c, &rc))
		return rc;
	int ok = 0;
	char *detail = NULL;
	int err = vad_check(c, &ok, &detail);
	if (err)
		return vactl_report_close(o, c, err);
	if (o->json) {
		print_flag_json("ok", ok, detail);
	} else if (ok) {
		print_with_detail("ok", detail);
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
