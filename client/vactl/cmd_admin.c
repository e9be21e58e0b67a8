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

/* Resident, busy and pooled bytes summed over the arenas stats reports (held at 2^64 - 1). */
struct resident_sum {
	bool known; /* the stats request worked */
	uint64_t resident, busy, pooled;
};

static struct resident_sum resident_of(vad_client *c, const char *arena)
{
	struct resident_sum r = {0};
	struct vad_daemon_stats *d;
	if (vad_stats_detail(c, arena, &d) != 0)
		return r; /* purge still runs; its own reply says why if it cannot */
	r.known = true;
	for (size_t i = 0; i < d->n_arenas; i++) {
		vactl_sum_into(&r.resident, d->arenas[i].resident_bytes);
		vactl_sum_into(&r.busy, d->arenas[i].busy_bytes);
		vactl_sum_into(&r.pooled, d->arenas[i].pooled_bytes);
	}
	free(d);
	return r;
}

static int run_purge(struct vactl_opts *o, int argc, char **argv)
{
	int first, rc;
	vad_client *c;
	if (!vactl_begin(&vactl_cmd_purge, o, argc, argv, 1, &first, &c, &rc))
		return rc;
	const char *arena = first < argc ? argv[first] : NULL;
	struct resident_sum before = resident_of(c, arena);
	uint64_t released = 0;
	int err = vad_purge_arena(c, arena, &released);
	if (err)
		return vactl_report_close(o, c, err);
	struct resident_sum after = resident_of(c, arena);
	bool known = before.known && after.known;
	if (o->json) {
		json_object *j = json_object_new_object();
		vactl_json_add_str(j, "arena", arena);
		vactl_json_add_u64(j, "released_bytes", released);
		json_object_object_add(j, "resident_before",
				       known ? vactl_json_u64(before.resident) : NULL);
		json_object_object_add(j, "resident_after",
				       known ? vactl_json_u64(after.resident) : NULL);
		json_object_object_add(j, "busy_bytes", known ? vactl_json_u64(after.busy) : NULL);
		json_object_object_add(j, "pooled_bytes",
				       known ? vactl_json_u64(after.pooled) : NULL);
		vactl_json_print(j);
	} else {
		char b[4][32];
		printf("purged %s: released %s (%llu bytes) to the system",
		       arena ? arena : "every arena", vactl_fmt_size(released, b[0], 32),
		       (unsigned long long)released);
		if (known)
			printf("; resident %s -> %s (busy %s, pooled %s)",
			       vactl_fmt_size(before.resident, b[1], 32),
			       vactl_fmt_size(after.resident, b[2], 32),
			       vactl_fmt_size(after.busy, b[3], 32),
			       vactl_fmt_size(after.pooled, b[0], 32));
		printf("\n");
	}
	vad_close(c);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_purge = {
    .name = "purge",
    .args = "[ARENA]",
    .summary = "give freed and free memory back to the system now (admin)",
    .help = "Makes the daemon reclaim every freed-but-lazy range, empty its per-node pools and\n"
	    "release every free block (free space a client wrote into included), in ARENA or\n"
	    "in every arena, and prints what went back: the drop in resident bytes, and the\n"
	    "resident bytes before and after (after a purge they are at most busy + pooled,\n"
	    "unless clients write meanwhile). Admin only.\n"
	    "JSON: {arena (null = all), released_bytes, resident_before, resident_after,\n"
	    "busy_bytes, pooled_bytes} (the last four null when the stats cannot be read)\n",
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
		puts(detail && *detail ? detail : "reloaded"); /* the daemon's sentence says it */
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
