/* sparkline.h - one-line charts of a series in Unicode block characters. */
#ifndef VACTL_SPARKLINE_H
#define VACTL_SPARKLINE_H

#include <stddef.h>

/* Draw v[0..n) into out as at most width cells (▁..█, scaled from 0 to the series' maximum;
 * consecutive values are averaged when n > width). out gets "" for n == 0. */
void vactl_sparkline(const double *v, size_t n, size_t width, char *out, size_t out_len);

#endif
