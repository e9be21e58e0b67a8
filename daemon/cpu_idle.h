/*
 * cpu_idle.h - how much CPU the machine leaves idle, from /proc/stat, counted over the CPUs
 * this process may run on. The adaptive balancer asks it before it wakes another worker: a
 * second worker can only take CPU that nobody else uses; on a machine its clients keep busy
 * it would compete with them for the same CPUs.
 */
#ifndef VAD_CPU_IDLE_H
#define VAD_CPU_IDLE_H

#include <sched.h> /* cpu_set_t (the build defines _GNU_SOURCE) */
#include <stddef.h>
#include <stdint.h>

struct vad_cpu_idle {
	int fd;	   /* /proc/stat, -1 when it cannot be read */
	char *buf; /* its text */
	size_t cap;
	uint64_t idle, total; /* jiffies at the last sample, over the allowed CPUs */
	unsigned cpus;	      /* allowed CPUs at the last sample */
	int primed;	      /* a first sample was taken */
};

/* Open /proc/stat and take the first sample; 0, or -1 when it cannot be read. */
int vad_cpu_idle_open(struct vad_cpu_idle *ci);

/* Average number of idle CPUs since the previous sample (0 up to the allowed CPUs), or -1
 * when unknown (not open, unreadable, or no time passed). */
double vad_cpu_idle_sample(struct vad_cpu_idle *ci);

/* Close what open opened (also after a failed open). */
void vad_cpu_idle_close(struct vad_cpu_idle *ci);

/* Sum the "cpuN" lines of /proc/stat text whose N is in allowed: *idle gets idle + iowait,
 * *total every state but guest time (already in user); *cpus how many lines counted.
 * Returns 0, or -1 when no line counted. */
int vad_cpu_idle_parse(const char *text, const cpu_set_t *allowed, uint64_t *idle, uint64_t *total,
		       unsigned *cpus);

#endif
