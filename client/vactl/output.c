/* output.c - aligned text tables, JSON documents and error names for vactl; see output.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "output.h"

/* The table's number of a VAD_E* code, or -1 (proto/errors.h). */
static int code_number(int err)
{
	return err <= 0 && err >= -VAD_ERROR_MAX ? -err : -1;
}

const char *vactl_err_label(int err)
{
	const char *l = vad_error_label(code_number(err));
	return l ? l : "error";
}

const char *vactl_err_name(int err)
{
	const char *n = vad_error_name(code_number(err));
	return n ? n : "EUNKNOWN";
}

struct vactl_table {
	size_t ncols, nrows, cap;
	char **cells; /* row-major, nrows + 1 rows (headers first) */
};

struct vactl_table *vactl_table_new(size_t ncols, const char *const *headers)
{
	struct vactl_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ncols = ncols;
	t->cap = 16;
	t->cells = calloc(t->cap * ncols, sizeof(char *));
	if (!t->cells) {
		free(t);
		return NULL;
	}
	for (size_t i = 0; i < ncols; i++)
		t->cells[i] = strdup(headers[i]);
	t->nrows = 1;
	return t;
}

int vactl_table_row(struct vactl_table *t, ...)
{
	if (!t)
		return -1;
	if (t->nrows == t->cap) {
		char **c = realloc(t->cells, t->cap * 2 * t->ncols * sizeof(char *));
		if (!c)
			return -1;
		t->cells = c;
		t->cap *= 2;
	}
	va_list ap;
	va_start(ap, t);
	for (size_t i = 0; i < t->ncols; i++) {
		const char *s = va_arg(ap, const char *);
		t->cells[t->nrows * t->ncols + i] = strdup(s ? s : "-");
	}
	va_end(ap);
	t->nrows++;
	return 0;
}

void vactl_table_print(struct vactl_table *t)
{
	if (!t)
		return;
	size_t *w = calloc(t->ncols, sizeof(*w));
	for (size_t r = 0; w && r < t->nrows; r++)
		for (size_t i = 0; i < t->ncols; i++) {
			const char *s = t->cells[r * t->ncols + i];
			size_t l = s ? strlen(s) : 0;
			if (l > w[i])
				w[i] = l;
		}
	for (size_t r = 0; w && r < t->nrows; r++) {
		for (size_t i = 0; i < t->ncols; i++) {
			const char *s = t->cells[r * t->ncols + i];
			if (!s)
				s = "?";
			if (i == 0)
				printf("%-*s", (int)w[i], s);
			else
				printf("  %*s", (int)w[i], s);
		}
		putchar('\n');
	}
	for (size_t k = 0; k < t->nrows * t->ncols; k++)
		free(t->cells[k]);
	free(t->cells);
	free(t);
	free(w);
}

void vactl_json_print(json_object *obj)
{
	puts(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
						     JSON_C_TO_STRING_NOSLASHESCAPE));
	fflush(stdout);
	json_object_put(obj);
}

void vactl_json_line(json_object *obj)
{
	puts(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
						     JSON_C_TO_STRING_NOSLASHESCAPE));
	fflush(stdout);
	json_object_put(obj);
}

void vactl_json_print_field(const char *key, json_object *value)
{
	json_object *j = json_object_new_object();
	json_object_object_add(j, key, value);
	vactl_json_print(j);
}

void vactl_json_add_error(json_object *obj, int err, const char *message)
{
	vactl_json_add_str(obj, "error", vactl_err_name(err));
	json_object_object_add(obj, "code", json_object_new_int(err));
	vactl_json_add_str(obj, "message", message);
}

json_object *vactl_json_u64(uint64_t v)
{
	return json_object_new_uint64(v);
}

void vactl_json_add_u64(json_object *obj, const char *key, uint64_t v)
{
	json_object_object_add(obj, key, vactl_json_u64(v));
}

void vactl_json_add_str(json_object *obj, const char *key, const char *s)
{
	json_object_object_add(obj, key, s ? json_object_new_string(s) : NULL);
}

double vactl_fragmentation(uint64_t free_bytes, uint64_t largest_free)
{
	if (free_bytes == 0 || largest_free >= free_bytes)
		return 0.0;
	return 1.0 - (double)largest_free / (double)free_bytes;
}

json_object *vactl_json_arena_stats(const struct vad_arena_stats *a)
{
	json_object *o = json_object_new_object();
	vactl_json_add_str(o, "name", a->name);
	vactl_json_add_u64(o, "size", a->size);
	vactl_json_add_u64(o, "quantum", a->quantum);
	vactl_json_add_u64(o, "busy_bytes", a->busy_bytes);
	vactl_json_add_u64(o, "free_bytes", a->free_bytes);
	vactl_json_add_u64(o, "lazy_bytes", a->lazy_bytes);
	vactl_json_add_u64(o, "pooled_bytes", a->pooled_bytes);
	vactl_json_add_u64(o, "resident_bytes", a->resident_bytes);
	vactl_json_add_u64(o, "committed_bytes", a->committed_bytes);
	vactl_json_add_u64(o, "commit_failures", a->commit_failures);
	vactl_json_add_u64(o, "waiters", a->waiters);
	vactl_json_add_u64(o, "oldest_wait_ms", a->oldest_wait_ms);
	vactl_json_add_u64(o, "waits", a->waits);
	vactl_json_add_u64(o, "wait_grants", a->wait_grants);
	vactl_json_add_u64(o, "wait_timeouts", a->wait_timeouts);
	vactl_json_add_u64(o, "wait_cancels", a->wait_cancels);
	vactl_json_add_u64(o, "wait_refusals", a->wait_refusals);
	vactl_json_add_u64(o, "busy_blocks", a->busy_blocks);
	vactl_json_add_u64(o, "free_blocks", a->free_blocks);
	vactl_json_add_u64(o, "lazy_blocks", a->lazy_blocks);
	vactl_json_add_u64(o, "pooled_blocks", a->pooled_blocks);
	vactl_json_add_u64(o, "largest_free", a->largest_free);
	vactl_json_add_u64(o, "allocs", a->allocs);
	vactl_json_add_u64(o, "frees", a->frees);
	vactl_json_add_u64(o, "fails", a->fails);
	vactl_json_add_u64(o, "drains", a->drains);
	vactl_json_add_u64(o, "released_bytes", a->released_bytes);
	vactl_json_add_u64(o, "release_calls", a->release_calls);
	vactl_json_add_u64(o, "pool_hits", a->pool_hits);
	json_object_object_add(
	    o, "fragmentation",
	    json_object_new_double(vactl_fragmentation(a->free_bytes, a->largest_free)));
	return o;
}
