/*
 * test_vactl_map.c - vactl map's picture against a real daemon: the SVG parsed (python3's XML
 * parser) has the offset axis, the totals, a <title> naming each of three sessions (one named
 * with XML markup), their
 * adjacent ranges as separate bars in different shades and a free colour that prints; --png
 * renders a PNG of the SVG's size; thousands of tiny ranges stay a bounded file; the walk's
 * JSON names each busy block's owner.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "vtassert.h"

#define PAGE 4096u

/* 64 MiB: rows of 8M, ticks at 0, 8M, ..., 56M; 1 px = 8K, so 4K ranges merge. */
static const char *const arena_conf = "[arena pic]\n"
				      "size = 64M\n";

VT_DAEMON_GROUP(group_setup, NULL, arena_conf)

/* Reads the SVG, checks what a reader needs and prints "ok", else says what is missing. */
static const char svg_check_py[] =
    "import sys, xml.etree.ElementTree as ET\n"
    "NS = '{http://www.w3.org/2000/svg}'\n"
    "path, names = sys.argv[1], sys.argv[2:]\n"
    "root = ET.parse(path).getroot()\n"
    "texts = [(t.get('class'), ''.join(t.itertext())) for t in root.iter(NS + 'text')]\n"
    "ticks = [s for c, s in texts if c == 'tick']\n"
    "want = ['0'] + ['%dM' % (8 * i) for i in range(1, 8)]\n"
    "assert ticks == want, 'row offsets %r, want %r' % (ticks, want)\n"
    "axis = [s for c, s in texts if c == 'axis']\n"
    "assert axis[0] == '+0' and axis[-1] == '+8M' and '+4M' in axis, 'axis %r' % axis\n"
    "totals = ' '.join(s for c, s in texts if c == 'totals')\n"
    "for w in ('size 64 MiB', 'busy ', 'free ', 'largest hole', 'fragmentation'):\n"
    "    assert w in totals, '%r not in the totals %r' % (w, totals)\n"
    "assert any(c == 'scale' and '1 px = 8K' in s for c, s in texts), 'no scale'\n"
    "owners = ' '.join(s for c, s in texts if c == 'owners')\n"
    "bars = [r for r in root.iter(NS + 'rect') if (r.get('class') or '').startswith('busy')]\n"
    "titles = [''.join(r.find(NS + 'title').itertext()) for r in bars]\n"
    "for n in names:\n"
    "    assert n in owners, '%s not in the owners line %r' % (n, owners)\n"
    "    mine = [i for i, t in enumerate(titles) if 'owner %s (session' % n in t]\n"
    "    assert len(mine) >= 2, 'bars of %s: %r' % (n, titles)\n"
    "    a, b = bars[mine[0]], bars[mine[1]]\n"
    "    ax, aw, bx = float(a.get('x')), float(a.get('width')), float(b.get('x'))\n"
    "    assert abs(ax + aw - bx) < 0.01, 'adjacent ranges of %s are not side by side' % n\n"
    "    assert a.get('fill') != b.get('fill'), 'adjacent ranges of %s share a shade' % n\n"
    "    assert 'size 1.0 MiB' in titles[mine[0]] and '(0x' in titles[mine[0]], titles[mine[0]]\n"
    "free = [r for r in root.iter(NS + 'rect') if r.get('class') == 'free']\n"
    "f = free[0].get('fill')\n"
    "lum = sum(int(f[i:i + 2], 16) for i in (1, 3, 5)) / 3 / 255\n"
    "assert lum < 0.85, 'free colour %s is nearly white' % f\n"
    "assert any(r.get('class') == 'largest-hole' for r in root.iter(NS + 'rect')), 'no hole'\n"
    "print('ok %d bars' % len(list(root.iter(NS + 'rect'))))\n";

/* The names of sessions that each hold two adjacent 1 MiB ranges. */
static void check_svg(const char *svg, const char *name_a, const char *name_b, const char *name_c)
{
	struct vt_output o;
	char *argv[] = {"/usr/bin/python3", "-c",	    (char *)svg_check_py, (char *)svg,
			(char *)name_a,	    (char *)name_b, (char *)name_c,	  NULL};
	assert_int_equal(0, vt_run(argv, NULL, vt_timeout_ms(30000), &o));
	if (o.exit_code != 0 || !vt_contains(o.out, "ok")) {
		vt_output_print("the SVG check", &o);
		fail_msg("%s is not the picture it should be", svg);
	}
	vt_output_free(&o);
}

/* Width and height from a PNG's IHDR; -1 if it is not a PNG. */
static int png_size(const char *path, unsigned *w, unsigned *h)
{
	unsigned char b[24];
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t got = fread(b, 1, sizeof(b), f);
	fclose(f);
	if (got != sizeof(b) || memcmp(b, "\x89PNG\r\n\x1a\n", 8) != 0 || memcmp(b + 12, "IHDR", 4))
		return -1;
	*w = (unsigned)b[16] << 24 | (unsigned)b[17] << 16 | (unsigned)b[18] << 8 | b[19];
	*h = (unsigned)b[20] << 24 | (unsigned)b[21] << 16 | (unsigned)b[22] << 8 | b[23];
	return 0;
}

/* The width and height attributes of the SVG's root. */
static void svg_size(const char *path, unsigned *w, unsigned *h)
{
	char head[512] = "";
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t got = fread(head, 1, sizeof(head) - 1, f);
	fclose(f);
	head[got] = '\0';
	const char *sv = strstr(head, "<svg");
	assert_non_null(sv);
	assert_int_equal(2, sscanf(strstr(sv, "width="), "width=\"%u\" height=\"%u\"", w, h));
}

static vad_client *holder(const struct vt_daemon *d, const char *name, size_t n, size_t size,
			  void **p)
{
	vad_client *c;
	assert_int_equal(0, vt_connect(d, name, &c));
	size_t sizes[8];
	for (size_t i = 0; i < n; i++)
		sizes[i] = size;
	VT_ASSERT_OK(c, vad_alloc_batch_in(c, "pic", n, sizes, 0, p));
	return c;
}

/* Two sessions, each with two adjacent 1 MiB ranges: the picture names both, keeps their
 * ranges apart, and the PNG has the SVG's size. */
static void test_map_picture(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_purge(d));
	void *pa[2], *pb[2];
	vad_client *a = holder(d, "map-alpha", 2, 1u << 20, pa);
	vad_client *b = holder(d, "map-beta", 2, 1u << 20, pb);
	/* a client names itself: markup in its name must not break the file */
	void *pc[2];
	const char *hostile = "x<y>&z"; /* the daemon escapes quotes itself */
	vad_client *c = holder(d, hostile, 2, 1u << 20, pc);
	char svg[PATH_MAX], png[PATH_MAX];
	snprintf(svg, sizeof(svg), "%s/pic.svg", d->dir);
	snprintf(png, sizeof(png), "%s/pic.png", d->dir);
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "--json", "map", "pic", "--svg", svg,
				     "--png", png, NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl map pic --svg --png");
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	struct json_object *blocks = vt_json_path(j, "blocks");
	int named_a = 0, named_b = 0;
	for (size_t i = 0; blocks && i < json_object_array_length(blocks); i++) {
		struct json_object *owner =
		    vt_json_path(json_object_array_get_idx(blocks, i), "owner");
		const char *n = owner ? json_object_get_string(owner) : "";
		named_a += strcmp(n, "map-alpha") == 0;
		named_b += strcmp(n, "map-beta") == 0;
	}
	assert_int_equal(2, named_a);
	assert_int_equal(2, named_b);
	json_object_put(j);
	vt_output_free(&o);

	check_svg(svg, "map-alpha", "map-beta", hostile);
	unsigned sw, sh, pw, ph;
	svg_size(svg, &sw, &sh);
	if (png_size(png, &pw, &ph) < 0)
		fail_msg("vactl map --png did not write a PNG to %s", png);
	assert_int_equal(sw, pw);
	assert_int_equal(sh, ph);

	/* --png alone (a temporary SVG) works too */
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "map", "pic", "--png", png, NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl map pic --png");
	assert_true(vt_contains(o.out, "wrote"));
	vt_output_free(&o);
	assert_int_equal(0, png_size(png, &pw, &ph));

	for (int i = 0; i < 2; i++) {
		VT_ASSERT_OK(a, vad_free(a, pa[i]));
		VT_ASSERT_OK(b, vad_free(b, pb[i]));
		VT_ASSERT_OK(c, vad_free(c, pc[i]));
	}
	vad_close(a);
	vad_close(b);
	vad_close(c);
}

/* Without rsvg-convert on PATH, --png says what to install and exits 1. */
static void test_png_without_rsvg(void **state)
{
	struct vt_daemon *d = *state;
	char png[PATH_MAX];
	snprintf(png, sizeof(png), "%s/none.png", d->dir);
	char vactl[PATH_MAX];
	snprintf(vactl, sizeof(vactl), "%s/vactl", vt_build_dir());
	char *argv[] = {"/usr/bin/env",
			"PATH=/nonexistent",
			vactl,
			"--socket",
			(char *)d->socket_path,
			"map",
			"pic",
			"--png",
			png,
			NULL};
	struct vt_output o;
	assert_int_equal(0, vt_run(argv, NULL, vt_timeout_ms(30000), &o));
	VT_ASSERT_EXIT(&o, 1, "vactl map --png without rsvg-convert");
	assert_true(vt_contains(o.err, "rsvg-convert"));
	assert_true(vt_contains(o.err, "librsvg2-bin"));
	vt_output_free(&o);
}

/* Thousands of 4 KiB ranges under 8 KiB pixels: merged bars, said so, a bounded file. */
static void test_many_ranges_bounded(void **state)
{
	struct vt_daemon *d = *state;
	enum { N = 6000, BATCH = 500 };
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "map-many", &c));
	static void *p[N];
	static size_t sizes[BATCH];
	for (size_t i = 0; i < BATCH; i++)
		sizes[i] = PAGE;
	for (size_t i = 0; i < N; i += BATCH)
		VT_ASSERT_OK(c, vad_alloc_batch_in(c, "pic", BATCH, sizes, 0, &p[i]));
	char svg[PATH_MAX];
	snprintf(svg, sizeof(svg), "%s/many.svg", d->dir);
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "map", "pic", "--svg", svg, NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl map pic --svg (many ranges)");
	vt_output_free(&o);
	FILE *f = fopen(svg, "r");
	assert_non_null(f);
	size_t rects = 0, merged = 0, bytes = 0;
	char line[4096];
	while (fgets(line, sizeof(line), f)) {
		bytes += strlen(line);
		rects += vt_contains(line, "<rect");
		merged += vt_contains(line, "blocks merged at this scale");
	}
	fclose(f);
	/* 6000 ranges would be 6000 bars; merged, the rows, legend and a few bars remain */
	if (rects >= 600 || merged == 0)
		fail_msg("%zu rects (%zu merged) for %d ranges in %zu bytes", rects, merged, N,
			 bytes);
	for (size_t i = 0; i < N; i += BATCH)
		VT_ASSERT_OK(c, vad_free_batch(c, BATCH, &p[i]));
	vad_close(c);
}

struct churn {
	const struct vt_daemon *d;
	int stop; /* atomic */
	unsigned long rounds;
};

/* Sessions come and go and allocate and free while the walk names owners. */
static void *churn_main(void *arg)
{
	struct churn *ch = arg;
	while (!__atomic_load_n(&ch->stop, __ATOMIC_RELAXED)) {
		vad_client *c;
		if (vt_connect(ch->d, "map-churn", &c) != 0)
			break;
		void *p[16];
		size_t sizes[16];
		for (int i = 0; i < 16; i++)
			sizes[i] = PAGE * (size_t)(1 + i % 3);
		for (int k = 0; k < 8 && vad_alloc_batch_in(c, "pic", 16, sizes, 0, p) == 0; k++)
			vad_free_batch(c, 16, p);
		vad_close(c); /* some holds go with the session */
		ch->rounds++;
	}
	return NULL;
}

/* Walks with owners while others allocate, free, connect and go: every walk succeeds and
 * the daemon stays consistent (under TSan: no race on the sessions' names and holds). */
static void test_map_while_others_churn(void **state)
{
	struct vt_daemon *d = *state;
	struct churn ch = {.d = d};
	pthread_t t;
	assert_int_equal(0, pthread_create(&t, NULL, churn_main, &ch));
	for (int i = 0; i < 5; i++) {
		struct vt_output o;
		assert_int_equal(0,
				 vt_vactl(d->socket_path, NULL, &o, "--json", "map", "pic", NULL));
		VT_ASSERT_EXIT(&o, 0, "vactl map pic while others churn");
		vt_output_free(&o);
	}
	__atomic_store_n(&ch.stop, 1, __ATOMIC_RELAXED);
	assert_int_equal(0, pthread_join(t, NULL));
	assert_true(ch.rounds > 0);
	assert_int_equal(0, vt_check_invariants(d));
}

static void test_stop(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_map_picture),
	    cmocka_unit_test(test_png_without_rsvg),
	    cmocka_unit_test(test_many_ranges_bounded),
	    cmocka_unit_test(test_map_while_others_churn),
	    cmocka_unit_test(test_stop),
	};
	return cmocka_run_group_tests_name("vactl map picture", tests, group_setup,
					   vt_group_daemon_stop_if_running);
}
