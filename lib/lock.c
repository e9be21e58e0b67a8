/*
 * lock.c - the allocator's locks: pthread mutexes for the rarely taken ones, and the slow
 * paths of struct va_spin (va_internal.h), a futex lock for the hot ones.
 *
 * A contended va_spin spins a little (critical sections are a few hundred instructions),
 * then marks itself waiting (2) and sleeps on the word; an unlock that finds 2 wakes one
 * sleeper, which takes the lock as 2 again so the next unlock wakes the others in turn.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "va_internal.h"

#define SPIN_TRIES 100

int va_mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t attr;
	int rc;

	if (pthread_mutexattr_init(&attr))
		return -1;
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
	rc = pthread_mutex_init(m, &attr);
	pthread_mutexattr_destroy(&attr);
	return rc ? -1 : 0;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

void va_spin_lock_slow(struct va_spin *l)
{
	uint32_t c;

	for (int i = 0; i < SPIN_TRIES; i++) {
		c = 0;
		if (atomic_load_explicit(&l->v, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak_explicit(&l->v, &c, 1, memory_order_acquire,
							  memory_order_relaxed))
			return;
		cpu_relax();
	}
	/* from here on hold it as 2: we cannot tell whether others sleep too */
	while (atomic_exchange_explicit(&l->v, 2, memory_order_acquire) != 0)
		syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void va_spin_wake(struct va_spin *l)
{
	syscall(SYS_futex, &l->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
