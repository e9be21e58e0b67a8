/* map_svg.h - vactl map's picture of an arena as SVG (map_svg.c); depends on nothing else of
 * vactl but the size formatting. */
#ifndef VACTL_MAP_SVG_H
#define VACTL_MAP_SVG_H

#include <stdint.h>
#include <stdio.h>

#include "vad.h"

/* What the blocks of a map add up to, by kind (enum vad_block_kind). */
struct vactl_map_summary {
	uint64_t bytes[4], blocks[4];
	uint64_t largest_free, largest_free_offset; /* the largest hole and where it starts */
	double fragmentation;
};

/* Most rows the picture has: each spans a power of two of bytes, with its offset on the left. */
#define VACTL_SVG_ROWS 8
/* Width of a row in pixels: bars narrower than one pixel are merged, so a picture of any
 * number of blocks has at most a few rectangles per pixel column. */
#define VACTL_SVG_PLOT_WIDTH 1024

/* Draw m into f as SVG: offset axis and scale, totals, one bar per block (merged below a
 * pixel, and said so), the largest hole marked, owners in each bar's <title>, a legend.
 * Returns 0, or -1 with errno set when writing fails. */
int vactl_map_svg(const struct vad_arena_map *m, const struct vactl_map_summary *sum, FILE *f);

/* An offset or size for an axis label: "0", "256M", "1.5G", "12K", "100" (bytes). */
const char *vactl_axis_label(uint64_t bytes, char *buf, size_t len);

/* map_png.c: render the SVG file svg to the PNG file png with rsvg-convert; 0, or -1 after
 * saying why on stderr (not installed, or it failed). */
int vactl_svg_to_png(const char *svg, const char *png);

#endif
