/* map_svg.c - an arena's layout as an SVG picture people read and print (vactl map --svg).
 *
 * The arena is cut into at most VACTL_SVG_ROWS rows of a power of two of bytes each, so the
 * offsets on the left and the ticks on top are round numbers (0, 256M, 512M, ...). Free space
 * is each row's background; every other block is a bar, neighbouring busy ranges in
 * alternating shades so two ranges never read as one. Bars narrower than a pixel merge with
 * their neighbours (their title says how many), which bounds the file at a few rectangles
 * per pixel column whatever the number of blocks.
 */
#include "map_svg.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "vactl.h"

/* Geometry, in pixels. */
enum {
	LEFT = 72,	  /* room for the row offsets */
	RIGHT = 24,	  /* room for the last tick's label */
	ROW0 = 134,	  /* top of the first row */
	ROW_H = 26,	  /* height of a row's bars */
	ROW_PITCH = 36,	  /* row to row, with room for the hole marker */
	TICKS = 8,	  /* ticks along a row */
	OWNERS_SHOWN = 6, /* owners named under the totals */
	OWNERS_KEPT = 64, /* owners counted one by one; the rest as "others" */
	WIDTH = LEFT + VACTL_SVG_PLOT_WIDTH + RIGHT, /* of the picture */
};

/* Colours that print: dark and medium blue for busy (alternating), a mid green for free that
 * paper still shows, orange for lazy, purple for pooled; they stay apart in grey too. */
static const char *const busy_fill[2] = {"#1f3f73", "#5b8fd0"};
static const char *const kind_fill[4] = {"#1f3f73", "#a9d39e", "#e08a1e", "#8e5cc2"};
static const char *const kind_word[4] = {"busy", "free", "lazy (freed, release pending)",
					 "pooled (released, kept for reuse)"};
#define HOLE_STROKE  "#c0392b"
#define LABEL_CHAR_W 6.7 /* width of one character of an 11 px monospace label */

const char *vactl_axis_label(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64, bytes);
		return buf;
	}
	unsigned i = 0;
	uint64_t unit = 1024;
	while (i + 1 < sizeof(units) - 1 && bytes / unit >= 1024) {
		unit <<= 10;
		i++;
	}
	if (bytes % unit == 0)
		snprintf(buf, len, "%" PRIu64 "%c", bytes / unit, units[i]);
	else
		snprintf(buf, len, "%.1f%c", (double)bytes / (double)unit, units[i]);
	return buf;
}

/* A session name as XML text: markup escaped, control and non-ASCII bytes as '?' (a client
 * names itself; its name must not break the file). */
static void put_xml(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '&')
			fputs("&amp;", f);
		else if (c == '<')
			fputs("&lt;", f);
		else if (c == '>')
			fputs("&gt;", f);
		else if (c == '"')
			fputs("&quot;", f);
		else if (c < 0x20 || c >= 0x7f)
			fputc('?', f);
		else
			fputc(c, f);
	}
}

/* The picture's scale: bytes per row, rows. */
struct layout {
	uint64_t row_bytes;
	uint64_t rows;
	uint64_t size;
};

static struct layout layout_of(const struct vad_arena_map *m)
{
	struct layout l = {.row_bytes = m->quantum ? m->quantum : 1, .size = m->size};
	uint64_t want = m->size / VACTL_SVG_ROWS + (m->size % VACTL_SVG_ROWS != 0);
	while (l.row_bytes < want && l.row_bytes <= UINT64_MAX / 2)
		l.row_bytes *= 2;
	l.rows = m->size / l.row_bytes + (m->size % l.row_bytes != 0);
	if (l.rows == 0)
		l.rows = 1;
	return l;
}

static double px(const struct layout *l, uint64_t bytes_into_row)
{
	return (double)((long double)bytes_into_row * VACTL_SVG_PLOT_WIDTH / l->row_bytes);
}

static unsigned row_y(uint64_t row)
{
	return (unsigned)(ROW0 + row * ROW_PITCH);
}

/* One bar being built: a block, or blocks merged below a pixel. */
struct bar {
	uint64_t row;
	double x0, x1;
	uint64_t start, end; /* bytes of the arena it covers */
	uint64_t bytes[4];
	size_t n, first;	    /* blocks in it, the first one's index */
	size_t owners[3], n_owners; /* distinct owners named (block indexes) */
	bool more_owners;
	unsigned shade; /* of its first block: busy blocks alternate, in address order */
};

struct svg {
	FILE *f;
	const struct vad_arena_map *m;
	struct layout l;
	struct bar bar;
	bool open;
	unsigned busy_seen; /* busy blocks so far, for the alternating shades */
	uint64_t merged;    /* bars that stand for more than one block */
};

static void title_owner(FILE *f, const struct vad_block_owner *o)
{
	fputs("; owner ", f);
	put_xml(f, o->name);
	fprintf(f, " (session %" PRIu64 ")", o->session);
	if (o->holders > 1)
		fprintf(f, " and %u other session%s", o->holders - 1, o->holders == 2 ? "" : "s");
}

static void bar_title(struct svg *s, const struct bar *b)
{
	FILE *f = s->f;
	char off[32], sz[32];
	fputs("<title>", f);
	if (b->n == 1) {
		const struct vad_block *k = &s->m->blocks[b->first];
		int kind = k->kind >= 0 && k->kind < 4 ? k->kind : 0;
		fprintf(f, "%s at %s (0x%" PRIx64 "), size %s", kind_word[kind],
			vactl_axis_label(k->offset, off, sizeof(off)), k->offset,
			vactl_fmt_size(k->size, sz, sizeof(sz)));
		if (s->m->owners && s->m->owners[b->first].name)
			title_owner(f, &s->m->owners[b->first]);
		else if (kind == VAD_BLOCK_BUSY)
			fputs("; owner not listed (its session is closing)", f);
	} else {
		fprintf(f, "%zu blocks merged at this scale, %s (0x%" PRIx64 ") to 0x%" PRIx64 ":",
			b->n, vactl_axis_label(b->start, off, sizeof(off)), b->start, b->end);
		static const char *const what[4] = {"busy", "free between them", "lazy", "pooled"};
		for (int k = 0; k < 4; k++)
			if (b->bytes[k])
				fprintf(f, " %s %s", what[k],
					vactl_fmt_size(b->bytes[k], sz, sizeof(sz)));
		if (b->n_owners) {
			fputs("; owners ", f);
			for (size_t i = 0; i < b->n_owners; i++) {
				if (i)
					fputs(", ", f);
				put_xml(f, s->m->owners[b->owners[i]].name);
			}
			if (b->more_owners)
				fputs(", ...", f);
		}
	}
	fputs("</title>", f);
}

static void bar_flush(struct svg *s)
{
	if (!s->open)
		return;
	s->open = false;
	struct bar *b = &s->bar;
	int top = 0; /* the kind of most of its blocks' bytes */
	for (int k = 2; k < 4; k++)
		if (b->bytes[k] > b->bytes[top])
			top = k;
	/* A merged bar is as opaque as it is full: free space between its blocks shows. */
	uint64_t span = b->end - b->start, gaps = b->bytes[VAD_BLOCK_FREE];
	double opacity = span && gaps ? (double)(span - gaps) / (double)span : 1.0;
	if (opacity < 0.25)
		opacity = 0.25;
	const char *fill = kind_fill[top];
	if (top == VAD_BLOCK_BUSY)
		fill = busy_fill[b->shade & 1];
	double w = b->x1 - b->x0 < 1.0 ? 1.0 : b->x1 - b->x0;
	if (b->n > 1)
		s->merged++;
	fprintf(s->f,
		"<rect class=\"%s%s\" x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%u\" "
		"fill=\"%s\" fill-opacity=\"%.2f\">",
		top == 0   ? "busy"
		: top == 2 ? "lazy"
			   : "pooled",
		b->n > 1 ? " merged" : "", LEFT + b->x0, row_y(b->row), w, ROW_H, fill, opacity);
	bar_title(s, b);
	fputs("</rect>\n", s->f);
	/* The owner's name on the bar itself when it fits, so a printout shows it too. */
	const char *owner =
	    b->n_owners == 1 && !b->more_owners ? s->m->owners[b->owners[0]].name : NULL;
	if (owner && w >= LABEL_CHAR_W * (double)(strlen(owner) + 1)) {
		fprintf(s->f,
			"<text class=\"owner\" x=\"%.2f\" y=\"%u\" font-size=\"11\" fill=\"%s\" "
			"pointer-events=\"none\">",
			LEFT + b->x0 + 3, row_y(b->row) + ROW_H / 2 + 4,
			top == VAD_BLOCK_BUSY && (b->shade & 1) == 0 ? "#ffffff" : "#000000");
		put_xml(s->f, owner);
		fputs("</text>\n", s->f);
	}
}

static void bar_note_owner(struct svg *s, struct bar *b, size_t i)
{
	const struct vad_block_owner *o = s->m->owners ? &s->m->owners[i] : NULL;
	if (!o || !o->name)
		return;
	for (size_t k = 0; k < b->n_owners; k++)
		if (strcmp(s->m->owners[b->owners[k]].name, o->name) == 0)
			return;
	if (b->n_owners < sizeof(b->owners) / sizeof(b->owners[0]))
		b->owners[b->n_owners++] = i;
	else
		b->more_owners = true;
}

/* Block i's part [start, end) inside one row: a bar of its own, or merged into the last one
 * when either is under a pixel and they share a pixel column. */
static void add_segment(struct svg *s, size_t i, uint64_t row, uint64_t start, uint64_t end)
{
	const struct vad_block *k = &s->m->blocks[i];
	uint64_t row_start = row * s->l.row_bytes;
	double x0 = px(&s->l, start - row_start), x1 = px(&s->l, end - row_start);
	struct bar *b = &s->bar;
	bool merge =
	    s->open && b->row == row && x0 - b->x1 < 1.0 && (b->x1 - b->x0 < 1.0 || x1 - x0 < 1.0);
	if (!merge) {
		bar_flush(s);
		memset(b, 0, sizeof(*b));
		b->row = row;
		b->x0 = x0;
		b->start = start;
		b->first = i;
		b->shade = s->busy_seen;
		s->open = true;
	}
	if (merge && start > b->end)
		b->bytes[VAD_BLOCK_FREE] += start - b->end; /* free space merged in between */
	b->n++; /* a block has one segment per row, and merging stays within a row */
	b->x1 = x1;
	b->end = end;
	b->bytes[k->kind >= 0 && k->kind < 4 ? k->kind : 0] += end - start;
	bar_note_owner(s, b, i);
}

static void draw_blocks(struct svg *s)
{
	for (size_t i = 0; i < s->m->n_blocks; i++) {
		const struct vad_block *k = &s->m->blocks[i];
		if (k->kind == VAD_BLOCK_FREE || k->size == 0 || k->offset >= s->l.size)
			continue;
		uint64_t end = k->size > s->l.size - k->offset ? s->l.size : k->offset + k->size;
		s->busy_seen += k->kind == VAD_BLOCK_BUSY;
		for (uint64_t at = k->offset; at < end;) {
			uint64_t row = at / s->l.row_bytes;
			uint64_t row_end = (row + 1) * s->l.row_bytes;
			uint64_t seg_end = end < row_end ? end : row_end;
			add_segment(s, i, row, at, seg_end);
			at = seg_end;
		}
	}
	bar_flush(s);
}

/* The rows: free background, the row's offset on the left. */
static void draw_rows(struct svg *s)
{
	char lab[32];
	for (uint64_t r = 0; r < s->l.rows; r++) {
		uint64_t start = r * s->l.row_bytes;
		uint64_t len =
		    s->l.size - start < s->l.row_bytes ? s->l.size - start : s->l.row_bytes;
		fprintf(
		    s->f, "<text class=\"tick\" x=\"%d\" y=\"%u\" text-anchor=\"end\">%s</text>\n",
		    LEFT - 6, row_y(r) + ROW_H / 2 + 4, vactl_axis_label(start, lab, sizeof(lab)));
		fprintf(s->f,
			"<rect class=\"free\" x=\"%d\" y=\"%u\" width=\"%.2f\" height=\"%u\" "
			"fill=\"%s\" stroke=\"#555\" stroke-width=\"0.5\"><title>free space, "
			"%s onwards</title></rect>\n",
			LEFT, row_y(r), px(&s->l, len), ROW_H, kind_fill[VAD_BLOCK_FREE], lab);
	}
}

/* Ticks along the top: offsets inside a row. */
static void draw_axis(struct svg *s)
{
	char lab[32];
	unsigned y = ROW0 - 10;
	fprintf(s->f, "<line x1=\"%d\" y1=\"%u\" x2=\"%d\" y2=\"%u\" stroke=\"#000\"/>\n", LEFT, y,
		LEFT + VACTL_SVG_PLOT_WIDTH, y);
	for (int t = 0; t <= TICKS; t++) {
		double x = LEFT + (double)VACTL_SVG_PLOT_WIDTH * t / TICKS;
		uint64_t off = s->l.row_bytes / TICKS * (uint64_t)t;
		fprintf(
		    s->f,
		    "<line x1=\"%.1f\" y1=\"%u\" x2=\"%.1f\" y2=\"%u\" stroke=\"#000\"/>"
		    "<text class=\"axis\" x=\"%.1f\" y=\"%u\" text-anchor=\"middle\">+%s</text>\n",
		    x, y - 4, x, y + 4, x, y - 8, vactl_axis_label(off, lab, sizeof(lab)));
	}
}

/* The largest hole: a dashed outline over each row it crosses and a marker at its start. */
static void draw_hole(struct svg *s, const struct vactl_map_summary *sum)
{
	if (!sum->largest_free)
		return;
	char sz[32], off[32];
	uint64_t start = sum->largest_free_offset, end = start + sum->largest_free;
	if (end > s->l.size)
		end = s->l.size;
	for (uint64_t at = start; at < end;) {
		uint64_t row = at / s->l.row_bytes, row_start = row * s->l.row_bytes;
		uint64_t seg_end =
		    end < row_start + s->l.row_bytes ? end : row_start + s->l.row_bytes;
		double x0 = px(&s->l, at - row_start), x1 = px(&s->l, seg_end - row_start);
		fprintf(s->f,
			"<rect class=\"largest-hole\" x=\"%.2f\" y=\"%u\" width=\"%.2f\" "
			"height=\"%u\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
			"stroke-dasharray=\"6 3\"><title>largest hole: %s at %s (0x%" PRIx64
			")</title></rect>\n",
			LEFT + x0, row_y(row) - 1, x1 - x0 < 1 ? 1 : x1 - x0, ROW_H + 2,
			HOLE_STROKE, vactl_fmt_size(sum->largest_free, sz, sizeof(sz)),
			vactl_axis_label(start, off, sizeof(off)), start);
		if (at == start) /* a downward triangle above where it starts */
			fprintf(s->f,
				"<path class=\"hole-marker\" d=\"M %.2f %u l -5 -7 h 10 z\" "
				"fill=\"%s\"/>\n",
				LEFT + x0, row_y(row) - 2, HOLE_STROKE);
		at = seg_end;
	}
}

/* One owner's busy bytes and ranges, for the owners line. */
struct owner_total {
	const char *name; /* libvad keeps one copy per distinct name: compared by pointer */
	uint64_t bytes, ranges;
};

static int by_bytes_desc(const void *a, const void *b)
{
	const struct owner_total *x = a, *y = b;
	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* "owners: a 6.0 MiB in 4 ranges, b ..." the biggest first, so a printout says who holds what. */
static void draw_owners(struct svg *s, unsigned y)
{
	const struct vad_arena_map *m = s->m;
	struct owner_total t[OWNERS_KEPT];
	size_t n = 0, last = 0;
	uint64_t other_bytes = 0, other_ranges = 0, unlisted = 0;
	for (size_t i = 0; i < m->n_blocks; i++) {
		if (m->blocks[i].kind != VAD_BLOCK_BUSY)
			continue;
		const char *name = m->owners ? m->owners[i].name : NULL;
		if (!name) {
			unlisted++;
			continue;
		}
		size_t k = last < n && t[last].name == name ? last : n;
		for (size_t j = 0; k == n && j < n; j++)
			if (t[j].name == name)
				k = j;
		if (k == n && n < OWNERS_KEPT)
			t[n++] = (struct owner_total){.name = name};
		if (k < n) {
			t[k].bytes += m->blocks[i].size;
			t[k].ranges++;
			last = k;
		} else {
			other_bytes += m->blocks[i].size;
			other_ranges++;
		}
	}
	qsort(t, n, sizeof(t[0]), by_bytes_desc);
	char sz[32];
	fprintf(s->f, "<text class=\"owners\" x=\"8\" y=\"%u\">owners:", y);
	for (size_t k = 0; k < n && k < OWNERS_SHOWN; k++) {
		fputs(k ? ", " : " ", s->f);
		put_xml(s->f, t[k].name);
		fprintf(s->f, " %s in %" PRIu64 " range%s",
			vactl_fmt_size(t[k].bytes, sz, sizeof(sz)), t[k].ranges,
			vad_plural(t[k].ranges));
	}
	for (size_t k = OWNERS_SHOWN; k < n; k++) {
		other_bytes += t[k].bytes;
		other_ranges += t[k].ranges;
	}
	if (other_ranges)
		fprintf(s->f, ", others %s in %" PRIu64 " range%s",
			vactl_fmt_size(other_bytes, sz, sizeof(sz)), other_ranges,
			vad_plural(other_ranges));
	if (!n && !other_ranges)
		fputs(" none", s->f);
	if (unlisted)
		fprintf(s->f, " (%" PRIu64 " range%s of closing sessions)", unlisted,
			vad_plural(unlisted));
	fputs("</text>\n", s->f);
}

static void draw_head(struct svg *s, const struct vactl_map_summary *sum)
{
	const struct vad_arena_map *m = s->m;
	FILE *f = s->f;
	char b[8][32];
	fputs("<text class=\"heading\" x=\"8\" y=\"20\" font-size=\"15\" font-weight=\"bold\">"
	      "arena ",
	      f);
	put_xml(f, m->arena);
	fprintf(f, "%s</text>\n", m->truncated ? " (first blocks only: --max-blocks)" : "");
	uint64_t ranges = sum->blocks[VAD_BLOCK_BUSY];
	fprintf(f,
		"<text class=\"totals\" x=\"8\" y=\"42\">size %s, busy %s in %" PRIu64
		" range%s, free %s, lazy %s, pooled %s</text>\n",
		vactl_fmt_size(m->size, b[0], 32), vactl_fmt_size(sum->bytes[0], b[1], 32), ranges,
		vad_plural(ranges), vactl_fmt_size(sum->bytes[1], b[2], 32),
		vactl_fmt_size(sum->bytes[2], b[3], 32), vactl_fmt_size(sum->bytes[3], b[4], 32));
	fprintf(f,
		"<text class=\"totals\" x=\"8\" y=\"60\">largest hole %s at %s, fragmentation "
		"%.1f%% (1 - largest hole / free)</text>\n",
		vactl_fmt_size(sum->largest_free, b[5], 32),
		vactl_axis_label(sum->largest_free_offset, b[6], 32), 100.0 * sum->fragmentation);
	draw_owners(s, 78);
	fprintf(f,
		"<text class=\"scale\" x=\"8\" y=\"98\">scale: one row = %s, 1 px = %s; offsets on "
		"the left, within a row on top</text>\n",
		vactl_axis_label(s->l.row_bytes, b[0], 32),
		vactl_axis_label(s->l.row_bytes / VACTL_SVG_PLOT_WIDTH
				     ? s->l.row_bytes / VACTL_SVG_PLOT_WIDTH
				     : 1,
				 b[1], 32));
}

static void draw_legend(struct svg *s, unsigned y)
{
	struct {
		const char *fill, *label;
	} items[] = {
	    {busy_fill[0], "busy"},
	    {busy_fill[1], "busy (next range)"},
	    {kind_fill[VAD_BLOCK_FREE], "free"},
	    {kind_fill[VAD_BLOCK_LAZY], "lazy"},
	    {kind_fill[VAD_BLOCK_POOLED], "pooled"},
	};
	unsigned x = 8;
	for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
		fprintf(s->f,
			"<rect class=\"legend\" x=\"%u\" y=\"%u\" width=\"12\" height=\"12\" "
			"fill=\"%s\" stroke=\"#555\" stroke-width=\"0.5\"/><text x=\"%u\" "
			"y=\"%u\">%s</text>\n",
			x, y - 10, items[i].fill, x + 16, y, items[i].label);
		x += 16 + 8 * (unsigned)strlen(items[i].label) + 18;
	}
	fprintf(s->f,
		"<rect x=\"%u\" y=\"%u\" width=\"12\" height=\"12\" fill=\"none\" stroke=\"%s\" "
		"stroke-width=\"2\" stroke-dasharray=\"4 2\"/><text x=\"%u\" y=\"%u\">largest "
		"hole</text>\n",
		x, y - 10, HOLE_STROKE, x + 16, y);
	if (!s->merged) {
		fprintf(s->f,
			"<text class=\"note\" x=\"8\" y=\"%u\">Hover a bar for its offset, size "
			"and owner. Every block has a bar of its own at this scale.</text>\n",
			y + 20);
		return;
	}
	fprintf(s->f,
		"<text class=\"note\" x=\"8\" y=\"%u\">Hover a bar for its offset, size and "
		"owner. %" PRIu64 " bar%s stand%s for several blocks narrower than a pixel "
		"(merged at this scale),</text>\n<text class=\"note\" x=\"8\" y=\"%u\">paler "
		"the more free space lies between them.</text>\n",
		y + 20, s->merged, vad_plural(s->merged), s->merged == 1 ? "s" : "", y + 38);
}

int vactl_map_svg(const struct vad_arena_map *m, const struct vactl_map_summary *sum, FILE *f)
{
	struct svg s = {.f = f, .m = m, .l = layout_of(m)};
	unsigned legend_y = row_y(s.l.rows) + 14;
	unsigned height = legend_y + 48;
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%u\" "
		"viewBox=\"0 0 %d %u\" font-family=\"DejaVu Sans Mono, monospace\" "
		"font-size=\"12\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
		WIDTH, height, WIDTH, height);
	draw_head(&s, sum);
	draw_axis(&s);
	draw_rows(&s);
	draw_blocks(&s);
	draw_hole(&s, sum);
	draw_legend(&s, legend_y);
	fputs("</svg>\n", f);
	return ferror(f) ? (errno = errno ? errno : EIO, -1) : 0;
}
