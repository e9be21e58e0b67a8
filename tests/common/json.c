/* json.c - reading vactl --json output with json-c. */
#include <errno.h>
#include <string.h>

#include <json-c/json.h>

#include "harness.h"

struct json_object *vt_json_parse(const char *text)
{
	if (!text) {
		fprintf(stderr, "harness: no JSON text\n");
		return NULL;
	}
	enum json_tokener_error jerr;
	struct json_object *o = json_tokener_parse_verbose(text, &jerr);
	if (!o)
		fprintf(stderr, "harness: not JSON (%s):\n%s\n", json_tokener_error_desc(jerr),
			text);
	return o;
}

struct json_object *vt_json_path(struct json_object *o, const char *path)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", path);
	char *save = NULL;
	for (char *part = strtok_r(buf, ".", &save); part && o; part = strtok_r(NULL, ".", &save)) {
		if (json_object_is_type(o, json_type_array)) {
			char *end;
			errno = 0;
			unsigned long idx = strtoul(part, &end, 10);
			if (*end || errno || idx >= json_object_array_length(o))
				return NULL;
			o = json_object_array_get_idx(o, idx);
		} else if (json_object_is_type(o, json_type_object)) {
			struct json_object *next = NULL;
			if (!json_object_object_get_ex(o, part, &next))
				return NULL;
			o = next;
		} else {
			return NULL;
		}
	}
	return o;
}

struct json_object *vt_json_find(struct json_object *o, const char *key)
{
	if (!o)
		return NULL;
	if (json_object_is_type(o, json_type_object)) {
		struct json_object *v = NULL;
		if (json_object_object_get_ex(o, key, &v))
			return v;
		json_object_object_foreach(o, k, child)
		{
			(void)k;
			struct json_object *found = vt_json_find(child, key);
			if (found)
				return found;
		}
	} else if (json_object_is_type(o, json_type_array)) {
		size_t n = json_object_array_length(o);
		for (size_t i = 0; i < n; i++) {
			struct json_object *found =
			    vt_json_find(json_object_array_get_idx(o, i), key);
			if (found)
				return found;
		}
	}
	return NULL;
}

int vt_json_u64(struct json_object *o, const char *path, uint64_t *out)
{
	struct json_object *v = vt_json_path(o, path);
	if (!v)
		return -1;
	if (json_object_is_type(v, json_type_int)) {
		int64_t i = json_object_get_int64(v);
		if (i < 0)
			return -1;
		/* json-c keeps large unsigned values as uint64 internally. */
		*out = json_object_get_uint64(v);
		return 0;
	}
	if (json_object_is_type(v, json_type_double)) {
		double dv = json_object_get_double(v);
		if (dv < 0)
			return -1;
		*out = (uint64_t)dv;
		return 0;
	}
	return -1;
}

int vt_json_lines(const char *text, struct json_object **out, int max)
{
	int n = 0;
	const char *line = text;
	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		bool blank = true;
		for (size_t i = 0; i < len; i++)
			if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
				blank = false;
		if (!blank) {
			if (n >= max) {
				fprintf(stderr, "harness: more than %d JSON lines\n", max);
				goto fail;
			}
			char *copy = strndup(line, len);
			if (!copy)
				goto fail;
			out[n] = vt_json_parse(copy);
			free(copy);
			if (!out[n])
				goto fail;
			n++;
		}
		line = end ? end + 1 : NULL;
	}
	return n;
fail:
	for (int i = 0; i < n; i++)
		json_object_put(out[i]);
	return -1;
}
