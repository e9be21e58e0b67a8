/* config_memory.c - the [arena] keys about what kind of memory an arena gets and when: backing =
 * hugetlb[:SIZE], huge, commit and numa_node; see config_parse.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config_parse.h"

static struct vad_arena_conf *arena_of(struct parse_state *ps)
{
	return &ps->cfg->arenas[ps->cfg->n_arenas - 1];
}

/* The kernel's default huge page size (/proc/meminfo Hugepagesize), 2 MiB if it does not say. */
static uint64_t default_huge_page(void)
{
	uint64_t kb = 2048;
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return kb << 10;
	char line[128];
	unsigned long long v;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1 && v)
			kb = v;
	fclose(f);
	return kb << 10;
}

/* Does the kernel have a pool of huge pages of this size? */
static bool huge_page_size_exists(uint64_t bytes)
{
	char path[96];
	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%llukB",
		 (unsigned long long)(bytes >> 10));
	return access(path, F_OK) == 0;
}

int arena_backing_hugetlb(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = arena_of(ps);
	uint64_t page = default_huge_page();
	const char *size = v + strlen("hugetlb");
	char sbuf[32];
	if (*size == ':' || *size == '-') {
		if (vad_parse_size(size + 1, &page) != 0 ||
		    (page != 2ull << 20 && page != 1ull << 30))
			return config_fail_at(ps, ps->lineno,
					      "%s = %s: the huge page size must be 2M or 1G "
					      "(e.g. hugetlb:2M)",
					      key, v);
	} else if (*size) {
		return config_fail_at(
		    ps, ps->lineno,
		    "%s = %s: expected memfd, hugetlb, hugetlb:2M, hugetlb:1G or a "
		    "directory",
		    key, v);
	}
	if (!huge_page_size_exists(page))
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: this kernel has no %s huge pages "
				      "(/sys/kernel/mm/hugepages has no pool of that size)",
				      key, v, vad_format_size(page, sbuf, sizeof(sbuf)));
	a->backing[0] = '\0';
	a->hugetlb_page = page;
	ps->hugetlb_page = page; /* the quantum's default and floor (finish_arena) */
	return 1;
}

int arena_huge(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = arena_of(ps);
	if (strcasecmp(v, "none") == 0 || strcasecmp(v, "no") == 0)
		a->thp = false;
	else if (strcasecmp(v, "thp") == 0)
		a->thp = true;
	else
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: expected none or thp (transparent huge pages; for "
				      "reserved huge pages write backing = hugetlb)",
				      key, v);
	return 1;
}

int arena_commit(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = arena_of(ps);
	if (strcasecmp(v, "touch") == 0)
		a->commit = VAD_COMMIT_TOUCH;
	else if (strcasecmp(v, "reserve") == 0)
		a->commit = VAD_COMMIT_RESERVE;
	else
		return config_fail_at(
		    ps, ps->lineno,
		    "%s = %s: expected touch (memory is found when a client first "
		    "touches a page) or reserve (the daemon commits a range's "
		    "memory before it grants it)",
		    key, v);
	return 1;
}

int arena_numa_node(struct parse_state *ps, const char *key, const char *v)
{
	struct vad_arena_conf *a = arena_of(ps);
	if (strcasecmp(v, "none") == 0) {
		a->numa = VAD_NUMA_NONE;
		a->numa_text[0] = '\0';
		return 1;
	}
	if (strcasecmp(v, "interleave") == 0) {
		a->numa = VAD_NUMA_INTERLEAVE;
		snprintf(a->numa_text, sizeof(a->numa_text), "interleave");
		return 1;
	}
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno || *end || end == v || n < 0 || n > VAD_NUMA_NODE_MAX)
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: expected none, interleave or a node number from 0 "
				      "to %d",
				      key, v, VAD_NUMA_NODE_MAX);
	char path[64];
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%ld", n);
	if (access("/sys/devices/system/node", F_OK) == 0 && access(path, F_OK) != 0)
		return config_fail_at(ps, ps->lineno,
				      "%s = %s: this machine has no NUMA node %ld (see "
				      "/sys/devices/system/node)",
				      key, v, n);
	a->numa = VAD_NUMA_NODE;
	a->numa_node = (unsigned)n;
	snprintf(a->numa_text, sizeof(a->numa_text), "node %u", a->numa_node);
	return 1;
}

int config_finish_memory(struct parse_state *ps, struct vad_arena_conf *a)
{
	if (a->thp && a->hugetlb_page)
		return config_fail_at(
		    ps, ps->arena_key_line[A_HUGE],
		    "huge = thp in [arena %s], whose backing is hugetlb: its pages "
		    "are huge already (remove the line)",
		    a->name);
	if (a->thp && a->backing[0])
		return config_fail_at(
		    ps, ps->arena_key_line[A_HUGE],
		    "huge = thp in [arena %s], whose backing is the directory %s: "
		    "transparent huge pages are asked for on a memfd only",
		    a->name, a->backing);
	return 1;
}
