/*
 * output.h - vactl's output (output.c): aligned text tables, JSON documents and the names
 * and labels of error codes. It depends on nothing else of vactl, so connecting and
 * reporting (client.c) use it and it never uses them.
 */
#ifndef VACTL_OUTPUT_H
#define VACTL_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "vad.h"

/* Short label ("quota exceeded") and symbolic name ("EQUOTA") of a VAD_E* code
 * (proto/errors.h); "error" and "EUNKNOWN" for a code not in the table. */
const char *vactl_err_label(int err);
const char *vactl_err_name(int err);

/* A text table: add rows of cells, then print with aligned columns. */
struct vactl_table;
struct vactl_table *vactl_table_new(size_t ncols, const char *const *headers);
/* Add a row; cells are printf-formatted strings passed as ncols const char * values. */
int vactl_table_row(struct vactl_table *t, ...);
/* Print the table (first column left-aligned, the rest right-aligned) and free it. */
void vactl_table_print(struct vactl_table *t);

/* Print obj as the command's one JSON document on stdout and drop the reference. */
void vactl_json_print(json_object *obj);

/* Print obj as one compact JSON line on stdout (flushed) and drop the reference. */
void vactl_json_line(json_object *obj);

/* Print {key: value} as the command's one JSON document (takes value's reference). */
void vactl_json_print_field(const char *key, json_object *value);

/* Add a failed call's fields to obj: error (symbolic name), code and message. */
void vactl_json_add_error(json_object *obj, int err, const char *message);

/* json_object_new_uint64 with a signed fallback for old json-c. */
json_object *vactl_json_u64(uint64_t v);

/* Add key: v (an unsigned integer) to obj. */
void vactl_json_add_u64(json_object *obj, const char *key, uint64_t v);

/* Add key: s (a string, or null when s is NULL) to obj. */
void vactl_json_add_str(json_object *obj, const char *key, const char *s);

/* Per-arena statistics as a JSON object with every field. */
json_object *vactl_json_arena_stats(const struct vad_arena_stats *a);

/* Share of free space that is not in the largest free block (0 when nothing is free). */
double vactl_fragmentation(uint64_t free_bytes, uint64_t largest_free);

#endif
