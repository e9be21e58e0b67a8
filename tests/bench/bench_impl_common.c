/*
 * bench_impl_common.c - the implementation table and helpers shared by the baselines.
 */
#include <string.h>

#include "bench_impl.h"

const struct bench_impl_ops *const bench_impls[] = {
    &bench_impl_vaspace,
    &bench_impl_exact,
    &bench_impl_segfit,
    &bench_impl_globallock,
    &bench_impl_busywalk,
    &bench_impl_listfit,
    &bench_impl_inline, /* vaspace with every drain in the freeing thread */
    NULL,
};

const struct bench_impl_ops *bench_impl_find(const char *name)
{
	for (unsigned i = 0; bench_impls[i]; i++)
		if (!strcmp(bench_impls[i]->name, name))
			return bench_impls[i];
	return NULL;
}

int bench_normalize(uint64_t quantum, uint64_t space_size, uint64_t *size, uint64_t *align)
{
	if (*size == 0)
		return VA_ESIZE;
	if (*align == 0)
		*align = quantum;
	if (*align & (*align - 1))
		return VA_EALIGN;
	if (*align < quantum)
		*align = quantum;
	if (*size > space_size || *align > space_size)
		return VA_EOVERFLOW;
	*size = (*size + quantum - 1) & ~(quantum - 1);
	return VA_OK;
}

int bench_check_congruent(uint64_t quantum, uint64_t space_size, const uint64_t *offs,
			  const uint64_t *sizes, unsigned n, uint64_t align, uint64_t *span)
{
	if (n == 0 || !offs || !sizes)
		return VA_EINVAL;
	if (align & (align - 1))
		return VA_EALIGN;
	if (align > space_size)
		return VA_EOVERFLOW;
	for (unsigned i = 0; i < n; i++) {
		if (sizes[i] == 0)
			return VA_ESIZE;
		if ((offs[i] | sizes[i]) & (quantum - 1))
			return VA_EINVAL;
		if (offs[i] > space_size || sizes[i] > space_size - offs[i])
			return VA_EOVERFLOW;
		if (i && offs[i] < offs[i - 1] + sizes[i - 1])
			return VA_EINVAL;
	}
	*span = offs[n - 1] + sizes[n - 1];
	return VA_OK;
}

int bench_congruent_search(void *h,
			   bool (*conflict)(void *h, uint64_t s, uint64_t e, uint64_t *new_end),
			   uint64_t vstart, uint64_t vend, const uint64_t *offs,
			   const uint64_t *sizes, unsigned n, uint64_t align, uint64_t *base_out)
{
	uint64_t span = offs[n - 1] + sizes[n - 1];
	uint64_t base, new_end;
	unsigned i;

	if (span > vend - vstart)
		return VA_ENOSPC;
	base = (vend - span) & ~(align - 1);
	if (base < vstart)
		return VA_ENOSPC;
	/*
	 * Top-down, like pcpu_get_vm_areas: check the areas from the last; when one
	 * overlaps busy space, move the base down so that area ends below the busy run
	 * and start the check over. Every move lowers the base, so this terminates.
	 */
	i = n;
	while (i > 0) {
		uint64_t s = base + offs[i - 1], e = s + sizes[i - 1];

		if (!conflict(h, s, e, &new_end)) {
			i--;
			continue;
		}
		if (new_end < vstart + offs[i - 1] + sizes[i - 1])
			return VA_ENOSPC;
		base = (new_end - offs[i - 1] - sizes[i - 1]) & ~(align - 1);
		if (base < vstart)
			return VA_ENOSPC;
		i = n;
	}
	*base_out = base;
	return VA_OK;
}
