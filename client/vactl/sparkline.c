/* sparkline.c - one-line charts; see sparkline.h. */
#include "sparkline.h"

#include <string.h>

void vactl_sparkline(const double *v, size_t n, size_t width, char *out, size_t out_len)
{
	static const char *const blocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
	if (out_len == 0)
		return;
	out[0] = '\0';
	if (n == 0 || width == 0)
		return;
	size_t cells = n < width ? n : width;
	double max = 0;
	for (size_t i = 0; i < n; i++)
		if (v[i] > max)
			max = v[i];
	size_t used = 0;
	for (size_t c = 0; c < cells; c++) {
		/* Cell c averages the values that fall into its share of the series. */
		size_t from = c * n / cells, to = (c + 1) * n / cells;
		double sum = 0;
		for (size_t i = from; i < to; i++)
			sum += v[i];
		double avg = to > from ? sum / (double)(to - from) : 0;
		int level = max > 0 ? (int)(avg / max * 7.0 + 0.5) : 0;
		if (level < 0)
			level = 0;
		if (level > 7)
			level = 7;
		size_t len = strlen(blocks[level]);
		if (used + len + 1 > out_len)
			break;
		memcpy(out + used, blocks[level], len);
		used += len;
	}
	out[used] = '\0';
}
