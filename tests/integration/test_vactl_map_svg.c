/*
 * test_vactl_map_svg.c - vactl map's SVG writer on maps made up here (no daemon): axis
 * labels, a block split across rows keeps its shade, neighbours alternate, names with markup
 * are escaped, a million blocks make a bounded file that says it merged them. Compiles
 * client/vactl/map_svg.c and units.c in directly (vactl is a program, not a library).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../client/vactl/map_svg.c"
#include "../../client/vactl/units.c"

/* The SVG of m (summarised as cmd_map.c does), malloc'd. */
static char *draw(const struct vad_arena_map *m, size_t *len)
{
	struct vactl_map_summary sum = {0};
	for (size_t i = 0; i < m->n_blocks; i++) {
		const struct vad_block *b = &m->blocks[i];
		sum.bytes[b->kind] += b->size;
		sum.blocks[b->kind]++;
		if (b->kind == VAD_BLOCK_FREE && b->size > sum.largest_free) {
			sum.largest_free = b->size;
			sum.largest_free_offset = b->offset;
		}
	}
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	assert_non_null(f);
	assert_int_equal(0, vactl_map_svg(m, &sum, f));
	assert_int_equal(0, fclose(f));
	return buf;
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;
	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

static void test_axis_labels(void **state)
{
	char b[32];
	assert_string_equal("0", vactl_axis_label(0, b, sizeof(b)));
	assert_string_equal("100", vactl_axis_label(100, b, sizeof(b)));
	assert_string_equal("12K", vactl_axis_label(12 << 10, b, sizeof(b)));
	assert_string_equal("256M", vactl_axis_label(256u << 20, b, sizeof(b)));
	assert_string_equal("1.5G", vactl_axis_label(3ull << 29, b, sizeof(b)));
	assert_string_equal("2T", vactl_axis_label(2ull << 40, b, sizeof(b)));
}

/* A 2 GiB arena: rows of 256M; one busy block across the first row boundary, its neighbour
 * right after it, a free rest. */
static void test_rows_shades_and_escaping(void **state)
{
	struct vad_block blocks[] = {
	    {0, 200u << 20, VAD_BLOCK_FREE, 0},
	    {200u << 20, 100u << 20, VAD_BLOCK_BUSY, 0}, /* 200M..300M: crosses 256M */
	    {300u << 20, 10u << 20, VAD_BLOCK_BUSY, 0},
	    {310u << 20, (2048u - 310u) << 20, VAD_BLOCK_FREE, 0},
	};
	struct vad_block_owner owners[4] = {{0}};
	owners[1] = (struct vad_block_owner){"a<b>&c", 4, 1};
	owners[2] = (struct vad_block_owner){"other", 5, 2};
	struct vad_arena_map m = {"big", 2ull << 30, 4096, 4, 0, blocks, owners};
	size_t len;
	char *svg = draw(&m, &len);
	for (int r = 0; r < 8; r++) {
		char want[64], lab[16];
		snprintf(want, sizeof(want), "text-anchor=\"end\">%s</text>",
			 vactl_axis_label((uint64_t)r * (256u << 20), lab, sizeof(lab)));
		if (!strstr(svg, want))
			fail_msg("no row label %s in\n%s", want, svg);
	}
	assert_non_null(strstr(svg, ">+128M</text>"));
	assert_non_null(strstr(svg, "scale: one row = 256M, 1 px = 256K"));
	/* the name escaped, never raw */
	assert_non_null(strstr(svg, "owner a&lt;b&gt;&amp;c (session 4)"));
	assert_null(strstr(svg, "a<b>"));
	assert_non_null(strstr(svg, "owner other (session 5) and 1 other session"));
	/* the crossing block: two bars, one shade; its neighbour the other shade */
	assert_int_equal(3, count(svg, "<rect class=\"busy\""));
	const char *first = strstr(svg, "<rect class=\"busy\"");
	const char *second = strstr(first + 1, "<rect class=\"busy\"");
	const char *third = strstr(second + 1, "<rect class=\"busy\"");
	char f1[16], f2[16], f3[16];
	assert_int_equal(1, sscanf(strstr(first, "fill=\""), "fill=\"%15[^\"]", f1));
	assert_int_equal(1, sscanf(strstr(second, "fill=\""), "fill=\"%15[^\"]", f2));
	assert_int_equal(1, sscanf(strstr(third, "fill=\""), "fill=\"%15[^\"]", f3));
	assert_string_equal(f1, f2);
	assert_string_not_equal(f2, f3);
	assert_non_null(strstr(svg, "largest hole 1.7 GiB at 310M"));
	free(svg);
}

/* A million single-quantum busy blocks with free quanta between them: bars merge below a
 * pixel, the file stays small and says so, and the merged bars are half transparent. */
static void test_million_blocks_bounded(void **state)
{
	enum { N = 1000000 };
	struct vad_block *blocks = calloc(2 * N, sizeof(*blocks));
	struct vad_block_owner *owners = calloc(2 * N, sizeof(*owners));
	assert_true(blocks && owners);
	for (size_t i = 0; i < 2 * N; i++) {
		blocks[i] =
		    (struct vad_block){i * 4096, 4096, i % 2 ? VAD_BLOCK_FREE : VAD_BLOCK_BUSY, 0};
		if (i % 2 == 0)
			owners[i] =
			    (struct vad_block_owner){i % 4 ? "even" : "odd", i % 4 ? 1 : 2, 1};
	}
	struct vad_arena_map m = {"many", 2ull * N * 4096, 4096, 2 * N, 0, blocks, owners};
	size_t len;
	char *svg = draw(&m, &len);
	size_t rects = count(svg, "<rect");
	if (rects > 8 * 2 * VACTL_SVG_PLOT_WIDTH || len > 4u << 20)
		fail_msg("%zu rects, %zu bytes for %d blocks", rects, len, N);
	assert_true(count(svg, "merged at this scale") > 0);
	assert_non_null(strstr(svg, "fill-opacity=\"0.50\""));
	assert_non_null(strstr(svg, "owners: "));
	assert_non_null(strstr(svg, "busy 3.8 GiB in 1000000 ranges"));
	free(svg);
	free(blocks);
	free(owners);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_axis_labels),
	    cmocka_unit_test(test_rows_shades_and_escaping),
	    cmocka_unit_test(test_million_blocks_bounded),
	};
	return cmocka_run_group_tests_name("vactl map svg", tests, NULL, NULL);
}
