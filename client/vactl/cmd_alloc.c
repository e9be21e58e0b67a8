/* cmd_alloc.c - one-shot allocation (alloc, with an optional hold), and free: a one-shot
 * command that explains it can only free ranges of its own session, then exits 2 (usage). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vactl.h"

struct alloc_args {
	const char *arena;
	uint64_t align;
	bool share;
	bool hold_forever;
	uint64_t hold_ms;
	const char *hold_text;
};

enum { OPT_ARENA = 0x2000, OPT_ALIGN, OPT_SHARE, OPT_HOLD };

static int on_alloc_opt(int opt, const char *arg, void *ctx)
{
	struct alloc_args *a = ctx;
	switch (opt) {
	case OPT_ARENA:
		a->arena = arg;
		return VACTL_EXIT_OK;
	case OPT_ALIGN:
		if (vactl_parse_size(arg, &a->align) < 0)
			return vactl_usage_error(
			    &vactl_cmd_alloc, "bad alignment '%s' (a power of two: 4K, 2M)", arg);
		if (!vactl_is_power_of_two(a->align))
			return vactl_usage_error(&vactl_cmd_alloc,
						 "--align %s: an alignment is a power of two (4K, "
						 "64K, 2M)",
						 arg);
		return VACTL_EXIT_OK;
	case OPT_SHARE:
		a->share = true;
		return VACTL_EXIT_OK;
	case OPT_HOLD:
		a->hold_text = arg;
		if (strcmp(arg, "forever") == 0)
			a->hold_forever = true;
		else if (vactl_parse_duration(arg, &a->hold_ms) < 0)
			return vactl_usage_error(&vactl_cmd_alloc,
						 "bad duration '%s' (try 10s, 5m, forever)", arg);
		return VACTL_EXIT_OK;
	}
	return VACTL_EXIT_USAGE;
}

/* Block SIGINT/SIGTERM/SIGHUP into *set, so that one arriving once the ranges are printed
 * ends the hold (and the ranges are freed) instead of killing vactl. */
static void block_hold_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigprocmask(SIG_BLOCK, set, NULL);
}

/* Wait for the hold time or until a signal of set (blocked); either way the caller frees. */
static void hold(const struct alloc_args *a, sigset_t set)
{
	if (a->hold_forever) {
		while (sigwaitinfo(&set, NULL) < 0 && errno == EINTR)
			;
		return;
	}
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)(a->hold_ms / 1000);
	end.tv_nsec += (long)(a->hold_ms % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		struct timespec left = {end.tv_sec - now.tv_sec, end.tv_nsec - now.tv_nsec};
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000L;
		}
		if (left.tv_sec < 0)
			return;
		int sig = sigtimedwait(&set, NULL, &left);
		if (sig > 0 || (sig < 0 && errno == EAGAIN))
			return;
	}
}

/* The SIZE arguments into sizes[n]; 0, or the usage error's exit code. */
static int parse_sizes(char **args, size_t n, size_t *sizes)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v;
		if (args[i][0] == '-' || (vactl_parse_size(args[i], &v) == 0 && v == 0))
			return vactl_usage_error(
			    &vactl_cmd_alloc, "size %s: a size must be positive (try 4096, 4K, 1M)",
			    args[i]);
		if (vactl_parse_size(args[i], &v) < 0 || v > SIZE_MAX)
			return vactl_usage_error(&vactl_cmd_alloc,
						 "bad size '%s' (try 4096, 4K, 1M)", args[i]);
		sizes[i] = (size_t)v;
	}
	return 0;
}

/* The granted ranges: a line each, or (with --json) the "ranges" array returned. */
static json_object *print_ranges(const struct vactl_opts *o, vad_client *c,
				 const struct alloc_args *a, size_t n, const size_t *sizes,
				 void *const *ptrs, char (*tokens)[VAD_TOKEN_LEN + 1])
{
	json_object *arr = o->json ? json_object_new_array() : NULL;
	for (size_t i = 0; i < n; i++) {
		struct vad_range r;
		vad_range_info(c, ptrs[i], &r);
		if (arr) {
			json_object *jr = json_object_new_object();
			vactl_json_add_str(jr, "arena", r.arena);
			vactl_json_add_u64(jr, "offset", r.offset);
			vactl_json_add_u64(jr, "size", r.size);
			vactl_json_add_u64(jr, "requested", sizes[i]);
			if (a->share)
				vactl_json_add_str(jr, "token", tokens[i]);
			json_object_array_add(arr, jr);
		} else {
			char b[32];
			printf("%s  offset %llu (0x%llx)  size %s (%zu bytes)%s%s\n", r.arena,
			       (unsigned long long)r.offset, (unsigned long long)r.offset,
			       vactl_fmt_size(r.size, b, sizeof(b)), r.size,
			       a->share ? "  token " : "", a->share ? tokens[i] : "");
		}
	}
	return arr;
}

/* Print the JSON document (if any), then keep the n ranges for --hold before they are freed. */
static void finish_output_and_hold(struct vactl_opts *o, struct alloc_args *a, size_t n,
				   json_object *arr)
{
	bool holding = a->hold_forever || a->hold_ms > 0;
	sigset_t hold_set;
	if (holding)
		block_hold_signals(&hold_set); /* before the output a caller waits for */
	if (arr) {
		json_object *j = json_object_new_object();
		json_object_object_add(j, "ranges", arr);
		vactl_json_add_str(j, "hold", holding ? a->hold_text : NULL);
		vactl_json_print(j);
	}
	fflush(stdout);
	if (!holding)
		return;
	char how[96];
	if (a->hold_forever)
		snprintf(how, sizeof(how), "until interrupted (Ctrl-C, SIGTERM)");
	else
		snprintf(how, sizeof(how), "for %s (Ctrl-C to stop early)", a->hold_text);
	fprintf(stderr,
		"vactl: holding %zu range%s %s; then vactl frees them and exits (the daemon "
		"also drops a session's ranges when it disconnects)\n",
		n, vad_plural(n), how);
	vactl_deadline(o, false);
	hold(a, hold_set);
	vactl_deadline(o, true);
}

static int run_alloc(struct vactl_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"arena", required_argument, NULL, OPT_ARENA},
	    {"align", required_argument, NULL, OPT_ALIGN},
	    {"share", no_argument, NULL, OPT_SHARE},
	    {"hold", required_argument, NULL, OPT_HOLD},
	    {0},
	};
	struct alloc_args a = {0};
	int first;
	int rc =
	    vactl_parse_cmd(&vactl_cmd_alloc, o, argc, argv, NULL, opts, on_alloc_opt, &a, &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	size_t n = (size_t)(argc - first);
	if (n == 0)
		return vactl_usage_error(&vactl_cmd_alloc, "give at least one SIZE");
	size_t *sizes = calloc(n, sizeof(*sizes));
	void **ptrs = calloc(n, sizeof(*ptrs));
	char(*tokens)[VAD_TOKEN_LEN + 1] = calloc(n, sizeof(*tokens));
	if (!sizes || !ptrs || !tokens) {
		fprintf(stderr, "vactl: out of memory\n");
		rc = VACTL_EXIT_REFUSED;
		goto out;
	}
	if ((rc = parse_sizes(argv + first, n, sizes)))
		goto out;
	vad_client *c;
	if ((rc = vactl_connect(o, &c)))
		goto out;
	int err = vad_alloc_batch_in(c, a.arena, n, sizes, (size_t)a.align, ptrs);
	for (size_t i = 0; !err && a.share && i < n; i++)
		err = vad_share(c, ptrs[i], tokens[i]);
	if (err) {
		rc = vactl_report_close(o, c, err);
		goto out;
	}
	finish_output_and_hold(o, &a, n, print_ranges(o, c, &a, n, sizes, ptrs, tokens));
	err = vad_free_batch(c, n, ptrs);
	if (err)
		rc = vactl_report(o, c, err);
	else if (!o->json)
		printf("freed %zu range%s\n", n, vad_plural(n));
	vad_close(c);
out:
	free(sizes);
	free(ptrs);
	free(tokens);
	return rc;
}

const struct vactl_cmd vactl_cmd_alloc = {
    .name = "alloc",
    .args = "SIZE [SIZE...] [--arena A] [--align N] [--share] [--hold DURATION|forever]",
    .summary = "allocate, print, optionally hold, then free ranges",
    .help = "Allocates one range per SIZE in one all-or-nothing request and prints each\n"
	    "range's arena, offset and (rounded) size; --share also makes a share token per\n"
	    "range that another process can attach to (vactl session: attach TOKEN).\n"
	    "  --arena A      allocate in arena A (default: the daemon's default arena)\n"
	    "  --align N      alignment, a power of two (default: the arena's quantum)\n"
	    "A size of 0, a negative size or an alignment that is not a power of two is a\n"
	    "usage error (exit 2); a size or alignment the arena cannot grant is refused by\n"
	    "the daemon (exit 1).\n"
	    "  --share        print a share token per range\n"
	    "  --hold D       keep the ranges for D (10s, 5m, 2h) or 'forever' (until Ctrl-C,\n"
	    "                 SIGTERM or SIGHUP) before freeing them\n"
	    "The ranges are freed before vactl exits: the daemon drops every range a session\n"
	    "holds when the session disconnects, so nothing outlives vactl (tokens included).\n"
	    "JSON (printed before any hold): {ranges: [{arena, offset, size, requested,\n"
	    "token}], hold}\n",
    .run = run_alloc,
};

static int run_free(struct vactl_opts *o, int argc, char **argv)
{
	int first;
	int rc = vactl_parse_cmd(&vactl_cmd_free, o, argc, argv, NULL, NULL, NULL, NULL, &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	fprintf(stderr,
		"vactl: free: a range can only be freed by the session that holds it, and every\n"
		"vactl command is a session of its own (its ranges are dropped when it exits).\n"
		"To free by hand, allocate and free inside one session:\n"
		"  printf 'alloc 4K\\nfree #1\\n' | vactl session\n");
	return VACTL_EXIT_USAGE;
}

const struct vactl_cmd vactl_cmd_free = {
    .name = "free",
    .args = "OFFSET|#N",
    .summary = "explains why free works only in a session (exits 2)",
    .help = "The daemon lets only a holder free a range, and each vactl command is a new\n"
	    "session that holds nothing, so this one-shot command cannot free anything.\n"
	    "Use 'vactl session' and its 'free OFFSET|#N' command instead. Always exits 2.\n",
    .run = run_free,
};
