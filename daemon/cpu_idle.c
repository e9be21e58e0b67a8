/*
 * cpu_idle.c - idle CPUs from /proc/stat (see cpu_idle.h).
 */
#include "cpu_idle.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STAT_FIELDS 8 /* user nice system idle iowait irq softirq steal; guest is in user */

int vad_cpu_idle_parse(const char *text, const cpu_set_t *allowed, uint64_t *idle, uint64_t *total,
		       unsigned *cpus)
{
	*idle = *total = 0;
	*cpus = 0;
	for (const char *line = text, *nl; *line; line = nl ? nl + 1 : line + strlen(line)) {
		nl = strchr(line, '\n');
		if (strncmp(line, "cpu", 3) != 0)
			break; /* the cpu lines come first; the rest (intr, ...) is not needed */
		const char *p = line + 3;
		if (*p < '0' || *p > '9')
			continue; /* the "cpu" line sums every CPU, allowed or not */
		char *end;
		unsigned long n = strtoul(p, &end, 10);
		if (n >= CPU_SETSIZE || !CPU_ISSET((int)n, allowed))
			continue;
		uint64_t v[STAT_FIELDS] = {0};
		p = end;
		for (int i = 0; i < STAT_FIELDS; i++) {
			if (*p != ' ')
				break; /* older kernels print fewer fields */
			v[i] = strtoull(p, &end, 10);
			p = end;
		}
		for (int i = 0; i < STAT_FIELDS; i++)
			*total += v[i];
		*idle += v[3] + v[4];
		(*cpus)++;
	}
	return *cpus ? 0 : -1;
}

/* Read the whole of /proc/stat into ci->buf (growing it); -1 on failure. */
static int read_stat(struct vad_cpu_idle *ci)
{
	for (;;) {
		ssize_t n = pread(ci->fd, ci->buf, ci->cap - 1, 0);
		if (n < 0)
			return -1;
		if ((size_t)n < ci->cap - 1) {
			ci->buf[n] = 0;
			return 0;
		}
		if (ci->cap >= (16u << 20))
			return -1;
		char *b = realloc(ci->buf, ci->cap * 2);
		if (!b)
			return -1;
		ci->buf = b;
		ci->cap *= 2;
	}
}

static int take(struct vad_cpu_idle *ci, uint64_t *idle, uint64_t *total, unsigned *cpus)
{
	cpu_set_t allowed;
	if (ci->fd < 0 || read_stat(ci) < 0)
		return -1;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0) {
		CPU_ZERO(&allowed);
		for (int i = 0; i < CPU_SETSIZE; i++)
			CPU_SET(i, &allowed);
	}
	return vad_cpu_idle_parse(ci->buf, &allowed, idle, total, cpus);
}

int vad_cpu_idle_open(struct vad_cpu_idle *ci)
{
	memset(ci, 0, sizeof(*ci));
	ci->cap = 16384;
	ci->buf = malloc(ci->cap);
	ci->fd = ci->buf ? open("/proc/stat", O_RDONLY | O_CLOEXEC) : -1;
	if (ci->fd < 0 || take(ci, &ci->idle, &ci->total, &ci->cpus) < 0) {
		vad_cpu_idle_close(ci);
		return -1;
	}
	ci->primed = 1;
	return 0;
}

double vad_cpu_idle_sample(struct vad_cpu_idle *ci)
{
	uint64_t idle, total;
	unsigned cpus;
	if (!ci->primed || take(ci, &idle, &total, &cpus) < 0)
		return -1;
	/* A changed affinity mask changes what the sums cover: start again from here. */
	double r = -1;
	if (cpus == ci->cpus && total > ci->total && idle >= ci->idle)
		r = (double)cpus * (double)(idle - ci->idle) / (double)(total - ci->total);
	ci->idle = idle;
	ci->total = total;
	ci->cpus = cpus;
	return r;
}

void vad_cpu_idle_close(struct vad_cpu_idle *ci)
{
	if (ci->fd >= 0)
		close(ci->fd);
	free(ci->buf);
	memset(ci, 0, sizeof(*ci));
	ci->fd = -1;
}
