/* cmd_map.c - an arena's layout as a picture: text cells in the terminal, or an SVG. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "map_svg.h"
#include "vactl.h"

struct map_args {
	uint64_t width, rows; /* cells of the text picture */
	const char *svg;      /* write an SVG picture to this file */
	const char *png;      /* and render it to this PNG (rsvg-convert) */
	bool blocks;	      /* list every block */
	uint64_t max_blocks;
};

enum { OPT_WIDTH = 0x6000, OPT_ROWS, OPT_SVG, OPT_BLOCKS, OPT_MAX_BLOCKS, OPT_PNG };

static int parse_count(const char *arg, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 10);
	if (errno || *end || end == arg || v == 0 || v > max)
		return -1;
	*out = v;
	return 0;
}

static int on_map_opt(int opt, const char *arg, void *ctx)
{
	struct map_args *m = ctx;
	switch (opt) {
	case OPT_WIDTH:
		if (parse_count(arg, 1000, &m->width) < 0)
			return vactl_usage_error(&vactl_cmd_map, "bad width '%s' (1..1000)", arg);
		return VACTL_EXIT_OK;
	case OPT_ROWS:
		if (parse_count(arg, 1000, &m->rows) < 0)
			return vactl_usage_error(&vactl_cmd_map, "bad rows '%s' (1..1000)", arg);
		return VACTL_EXIT_OK;
	case OPT_SVG:
		m->svg = arg;
		return VACTL_EXIT_OK;
	case OPT_PNG:
		m->png = arg;
		return VACTL_EXIT_OK;
	case OPT_BLOCKS:
		m->blocks = true;
		return VACTL_EXIT_OK;
	case OPT_MAX_BLOCKS:
		if (parse_count(arg, UINT64_MAX, &m->max_blocks) < 0)
			return vactl_usage_error(&vactl_cmd_map, "bad block count '%s'", arg);
		return VACTL_EXIT_OK;
	}
	return VACTL_EXIT_USAGE;
}

static const char *const kind_names[] = {"busy", "free", "lazy", "pooled"};

static const char *kind_name(int kind)
{
	return kind >= 0 && kind < 4 ? kind_names[kind] : "unknown";
}

/* Bytes of each kind inside [lo, hi) of the arena; blocks are in address order and *cursor
 * remembers where the previous cell's scan ended. Bytes in no block count as free. */
static void cell_bytes(const struct vad_arena_map *m, uint64_t lo, uint64_t hi, size_t *cursor,
		       uint64_t bytes[4])
{
	memset(bytes, 0, 4 * sizeof(bytes[0]));
	uint64_t covered = 0;
	size_t i = *cursor;
	while (i < m->n_blocks && m->blocks[i].offset + m->blocks[i].size <= lo)
		i++;
	*cursor = i;
	for (; i < m->n_blocks && m->blocks[i].offset < hi; i++) {
		const struct vad_block *b = &m->blocks[i];
		uint64_t s = b->offset > lo ? b->offset : lo;
		uint64_t e = b->offset + b->size < hi ? b->offset + b->size : hi;
		if (e > s && b->kind >= 0 && b->kind < 4) {
			bytes[b->kind] += e - s;
			covered += e - s;
		}
	}
	bytes[VAD_BLOCK_FREE] += (hi - lo) - covered;
}

/* One character for a cell: '#' busy, '.' free, 'l' lazy, 'p' pooled, '+' mostly busy
 * with some free, '-' mostly free with some busy. */
static char cell_char(const uint64_t bytes[4])
{
	uint64_t total = bytes[0] + bytes[1] + bytes[2] + bytes[3];
	int top = 0;
	for (int k = 1; k < 4; k++)
		if (bytes[k] > bytes[top])
			top = k;
	if (bytes[top] == total)
		return "#.lp"[top];
	if (top == VAD_BLOCK_BUSY)
		return '+';
	if (top == VAD_BLOCK_FREE)
		return bytes[VAD_BLOCK_BUSY] ? '-' : '.';
	return "#.lp"[top];
}

/* What the blocks of m add up to, by kind; the largest hole and where it starts. */
static void summarize(const struct vad_arena_map *m, struct vactl_map_summary *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (size_t i = 0; i < m->n_blocks; i++) {
		const struct vad_block *b = &m->blocks[i];
		if (b->kind < 0 || b->kind >= 4)
			continue;
		sum->bytes[b->kind] += b->size;
		sum->blocks[b->kind]++;
		if (b->kind == VAD_BLOCK_FREE && b->size > sum->largest_free) {
			sum->largest_free = b->size;
			sum->largest_free_offset = b->offset;
		}
	}
	sum->fragmentation = vactl_fragmentation(sum->bytes[VAD_BLOCK_FREE], sum->largest_free);
}

/* Parse the command line, connect and walk the arena into *m. Returns VACTL_EXIT_OK with
 * *m set, -1 after --help, or the exit code of the failure. */
static int fetch_map(struct vactl_opts *o, int argc, char **argv, struct map_args *a,
		     struct vad_arena_map **m)
{
	static const struct option opts[] = {
	    {"width", required_argument, NULL, OPT_WIDTH},
	    {"rows", required_argument, NULL, OPT_ROWS},
	    {"svg", required_argument, NULL, OPT_SVG},
	    {"png", required_argument, NULL, OPT_PNG},
	    {"blocks", no_argument, NULL, OPT_BLOCKS},
	    {"max-blocks", required_argument, NULL, OPT_MAX_BLOCKS},
	    {0},
	};
	int first;
	int rc = vactl_parse_cmd(&vactl_cmd_map, o, argc, argv, NULL, opts, on_map_opt, a, &first);
	if (rc)
		return rc;
	if ((rc = vactl_check_operands(&vactl_cmd_map, argc, argv, first, 1)))
		return rc;
	const char *arena = first < argc ? argv[first] : NULL;
	vad_client *c;
	if ((rc = vactl_connect(o, &c)))
		return rc;
	int err = vad_walk(c, arena, (size_t)a->max_blocks, m);
	if (err)
		return vactl_report_close(o, c, err);
	vad_close(c);
	return VACTL_EXIT_OK;
}

static void print_map_json(const struct vad_arena_map *m, const struct vactl_map_summary *sum,
			   const struct map_args *a)
{
	json_object *j = json_object_new_object();
	vactl_json_add_str(j, "arena", m->arena);
	vactl_json_add_u64(j, "size", m->size);
	vactl_json_add_u64(j, "quantum", m->quantum);
	vactl_json_add_u64(j, "n_blocks", m->n_blocks);
	json_object_object_add(j, "truncated", json_object_new_boolean(m->truncated));
	for (int k = 0; k < 4; k++) {
		char key[32];
		snprintf(key, sizeof(key), "%s_bytes", kind_names[k]);
		vactl_json_add_u64(j, key, sum->bytes[k]);
		snprintf(key, sizeof(key), "%s_blocks", kind_names[k]);
		vactl_json_add_u64(j, key, sum->blocks[k]);
	}
	vactl_json_add_u64(j, "largest_free", sum->largest_free);
	json_object_object_add(j, "fragmentation", json_object_new_double(sum->fragmentation));
	vactl_json_add_u64(j, "largest_free_offset", sum->largest_free_offset);
	vactl_json_add_str(j, "svg", a->svg);
	vactl_json_add_str(j, "png", a->png);
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < m->n_blocks; i++) {
		json_object *jb = json_object_new_object();
		vactl_json_add_u64(jb, "offset", m->blocks[i].offset);
		vactl_json_add_u64(jb, "size", m->blocks[i].size);
		vactl_json_add_str(jb, "kind", kind_name(m->blocks[i].kind));
		vactl_json_add_u64(jb, "node", m->blocks[i].node);
		const struct vad_block_owner *ow = &m->owners[i];
		if (ow->name) {
			vactl_json_add_str(jb, "owner", ow->name);
			vactl_json_add_u64(jb, "owner_session", ow->session);
			vactl_json_add_u64(jb, "holders", ow->holders);
		}
		json_object_array_add(arr, jb);
	}
	json_object_object_add(j, "blocks", arr);
	vactl_json_print(j);
}

/* The picture: a.rows lines of a.width cells, each an equal share of the arena. */
static void print_map_grid(const struct vad_arena_map *m, const struct map_args *a)
{
	uint64_t cells = a->width * a->rows;
	size_t cursor = 0;
	char *line = malloc(a->width + 1);
	for (uint64_t r = 0; line && r < a->rows; r++) {
		for (uint64_t col = 0; col < a->width; col++) {
			uint64_t cell = r * a->width + col;
			uint64_t lo = (uint64_t)((long double)m->size * cell / cells);
			uint64_t hi = (uint64_t)((long double)m->size * (cell + 1) / cells);
			uint64_t cb[4];
			cell_bytes(m, lo, hi, &cursor, cb);
			line[col] = cell_char(cb);
		}
		line[a->width] = '\0';
		printf("  |%s|\n", line);
	}
	free(line);
}

static void print_map_blocks(const struct vad_arena_map *m)
{
	static const char *const heads[] = {"OFFSET", "SIZE", "KIND", "NODE", "OWNER"};
	struct vactl_table *t = vactl_table_new(5, heads);
	for (size_t i = 0; i < m->n_blocks; i++) {
		char off[32], node[16], size[32], owner[96] = "-";
		snprintf(off, sizeof(off), "0x%llx", (unsigned long long)m->blocks[i].offset);
		snprintf(node, sizeof(node), "%u", m->blocks[i].node);
		const struct vad_block_owner *ow = &m->owners[i];
		if (ow->name)
			snprintf(owner, sizeof(owner), "%s (session %llu)%s", ow->name,
				 (unsigned long long)ow->session,
				 ow->holders > 1 ? " +shared" : "");
		vactl_table_row(t, off, vactl_fmt_size(m->blocks[i].size, size, sizeof(size)),
				kind_name(m->blocks[i].kind), node, owner);
	}
	vactl_table_print(t);
}

static void print_map_text(const struct vad_arena_map *m, const struct vactl_map_summary *sum,
			   const struct map_args *a)
{
	char b1[32], b2[32], b3[32];
	printf("arena %s: %s in %zu block%s%s, quantum %s; each cell is %s\n", m->arena,
	       vactl_fmt_size(m->size, b1, sizeof(b1)), m->n_blocks, vad_plural(m->n_blocks),
	       m->truncated ? " (truncated: --max-blocks)" : "",
	       vactl_fmt_size(m->quantum, b2, sizeof(b2)),
	       vactl_fmt_size(m->size / (a->width * a->rows), b3, sizeof(b3)));
	print_map_grid(m, a);
	printf("  # busy  . free  l lazy  p pooled  + mostly busy  - mostly free\n");
	for (int k = 0; k < 4; k++)
		printf("  %-7s %12s in %llu block%s\n", kind_names[k],
		       vactl_fmt_size(sum->bytes[k], b1, sizeof(b1)),
		       (unsigned long long)sum->blocks[k], vad_plural(sum->blocks[k]));
	printf("  largest free block %s, fragmentation %.1f%%\n",
	       vactl_fmt_size(sum->largest_free, b1, sizeof(b1)), 100.0 * sum->fragmentation);
	if (a->blocks)
		print_map_blocks(m);
	if (a->svg)
		printf("wrote %s\n", a->svg);
	if (a->png)
		printf("wrote %s\n", a->png);
}

/* Write the SVG picture to path. */
static int write_svg(const struct vad_arena_map *m, const struct vactl_map_summary *sum,
		     const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "vactl: cannot write %s: %s\n", path, strerror(errno));
		return VACTL_EXIT_REFUSED;
	}
	int w = vactl_map_svg(m, sum, f);
	int e = errno;
	if (fclose(f) != 0 || w < 0) {
		fprintf(stderr, "vactl: cannot write %s: %s\n", path, strerror(w < 0 ? e : errno));
		return VACTL_EXIT_REFUSED;
	}
	return VACTL_EXIT_OK;
}

/* The pictures asked for: the SVG (to --svg, or a temporary file for --png alone) and the
 * PNG rendered from it. */
static int write_pictures(const struct vad_arena_map *m, const struct vactl_map_summary *sum,
			  const struct map_args *a)
{
	char tmp[] = "/tmp/vactl-map-XXXXXX.svg";
	const char *svg = a->svg;
	if (!svg) {
		int fd = mkstemps(tmp, 4);
		if (fd < 0) {
			fprintf(stderr, "vactl: cannot make a temporary SVG file: %s\n",
				strerror(errno));
			return VACTL_EXIT_REFUSED;
		}
		close(fd);
		svg = tmp;
	}
	int rc = write_svg(m, sum, svg);
	if (rc == VACTL_EXIT_OK && a->png && vactl_svg_to_png(svg, a->png) < 0)
		rc = VACTL_EXIT_REFUSED;
	if (!a->svg)
		unlink(tmp);
	return rc;
}

static int run_map(struct vactl_opts *o, int argc, char **argv)
{
	struct map_args a = {.width = 64, .rows = 16, .max_blocks = 1000000};
	struct vad_arena_map *m;
	int rc = fetch_map(o, argc, argv, &a, &m);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	struct vactl_map_summary sum;
	summarize(m, &sum);
	if ((a.svg || a.png) && (rc = write_pictures(m, &sum, &a)) != VACTL_EXIT_OK) {
		free(m);
		return rc;
	}
	if (o->json)
		print_map_json(m, &sum, &a);
	else
		print_map_text(m, &sum, &a);
	free(m);
	return VACTL_EXIT_OK;
}

const struct vactl_cmd vactl_cmd_map = {
    .name = "map",
    .args = "[ARENA] [--width N] [--rows N] [--svg FILE] [--png FILE] [--blocks] [--max-blocks N]",
    .summary = "fragmentation picture of an arena, in the terminal or as SVG (admin)",
    .help =
	"Walks the arena's blocks in address order (admin) and draws them: each character\n"
	"stands for an equal share of the arena ('#' busy, '.' free, 'l' lazy, 'p' pooled,\n"
	"'+' mostly busy, '-' mostly free), --width columns by --rows rows (64 x 16).\n"
	"  --svg FILE       also draw it as an SVG picture into FILE: rows at round\n"
	"                   offsets, totals, owners, the largest hole marked, each range\n"
	"                   a bar (neighbours in alternating shades, those under a pixel\n"
	"                   merged) whose tooltip names its owner session, offset, size\n"
	"  --png FILE       also render that picture to a PNG (needs rsvg-convert,\n"
	"                   Debian package librsvg2-bin)\n"
	"  --blocks         list every block (offset, size, kind, node, owner)\n"
	"  --max-blocks N   fetch at most N blocks (default 1000000)\n"
	"The walk is fetched a page at a time, so under load it is not one instant.\n"
	"JSON: {arena, size, quantum, n_blocks, truncated, busy_bytes, busy_blocks, free_bytes,\n"
	"free_blocks, lazy_bytes, lazy_blocks, pooled_bytes, pooled_blocks, largest_free,\n"
	"largest_free_offset, fragmentation, svg, png, blocks: [{offset, size, kind, node,\n"
	"owner, owner_session, holders (busy blocks whose session is listed)}]}\n",
    .run = run_map,
};
