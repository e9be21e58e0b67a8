/*
 * waiters.c - the table of calls in flight and how their threads sleep and wake.
 *
 * A waiting call sleeps on its own futex word (its state), so the reader wakes exactly the
 * threads it answered, once each, after releasing c->lock: an answered thread never takes
 * the lock again (it reads its result after an acquire load of the state), so the wake
 * costs one syscall and the woken thread does not queue on the lock behind the reader.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

static struct libvad_pending **bucket(vad_client *c, uint64_t id)
{
	return &c->pending[id % LIBVAD_PENDING_BUCKETS];
}

void libvad_pending_add(vad_client *c, struct libvad_pending *p)
{
	struct libvad_pending **b = bucket(c, p->id);
	__atomic_store_n(&p->state, LIBVAD_WAITING, __ATOMIC_RELAXED);
	p->prev = NULL;
	p->next = *b;
	if (*b)
		(*b)->prev = p;
	*b = p;
	if (p->wants_fd)
		__atomic_store_n(&c->fd_waiters, c->fd_waiters + 1, __ATOMIC_RELAXED);
}

void libvad_pending_remove(vad_client *c, struct libvad_pending *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		*bucket(c, p->id) = p->next;
	if (p->next)
		p->next->prev = p->prev;
	p->prev = p->next = NULL;
	if (p->wants_fd)
		__atomic_store_n(&c->fd_waiters, c->fd_waiters - 1, __ATOMIC_RELAXED);
}

struct libvad_pending *libvad_pending_find(vad_client *c, uint64_t id)
{
	struct libvad_pending *p = *bucket(c, id);
	while (p && p->id != id)
		p = p->next;
	return p;
}

/* Queue a futex word; if the list is full, wake the oldest at once (under the lock: slower,
 * never wrong). */
static void wakes_add(struct libvad_wakes *w, uint32_t *word)
{
	if (w->n == sizeof(w->words) / sizeof(w->words[0])) {
		syscall(SYS_futex, w->words[0], FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		w->words[0] = w->words[--w->n];
	}
	w->words[w->n++] = word;
}

void libvad_pending_finish(vad_client *c, struct libvad_pending *p, int err, Vad__Response *resp,
			   int fd, struct libvad_wakes *w)
{
	libvad_pending_remove(c, p);
	p->err = err;
	p->resp = resp;
	p->fd = fd;
	uint32_t was = __atomic_exchange_n(&p->state, LIBVAD_DONE, __ATOMIC_RELEASE);
	/* A waiter that is not asleep sees DONE before it would sleep (it checks under the
	 * lock, or futex_wait finds the word changed): no wake needed. A wake that lands
	 * after the waiter has returned is a spurious wake-up of whatever uses that stack
	 * word next, which every futex user tolerates. */
	if (was == LIBVAD_SLEEPING) {
		c->sleepers--;
		wakes_add(w, &p->state);
	}
}

void libvad_pending_wake_reader(vad_client *c, struct libvad_wakes *w)
{
	/* The oldest call: replies come in the order the daemon read the requests, so its
	 * reply is the next one (it may be in the socket already, and then the new reader
	 * returns with it without sleeping again). */
	struct libvad_pending *oldest = NULL;
	if (c->sleepers == 0)
		return; /* every waiter is awake and checks c->reading before it sleeps */
	for (size_t i = 0; i < LIBVAD_PENDING_BUCKETS; i++)
		for (struct libvad_pending *p = c->pending[i]; p; p = p->next)
			if (__atomic_load_n(&p->state, __ATOMIC_RELAXED) == LIBVAD_SLEEPING &&
			    (!oldest || p->id < oldest->id))
				oldest = p;
	if (!oldest)
		return;
	c->sleepers--;
	__atomic_store_n(&oldest->state, LIBVAD_WAITING, __ATOMIC_RELAXED);
	wakes_add(w, &oldest->state);
}

void libvad_fail_all_locked(vad_client *c, int err)
{
	if (!c->dead_err) {
		c->dead_err = err;
		/* A broken stream may have a half-read frame in it; stop the daemon too, and
		 * wake a reader blocked in recvmsg. */
		shutdown(c->sock, SHUT_RDWR);
	}
	struct libvad_wakes w = {.n = 0};
	for (size_t i = 0; i < LIBVAD_PENDING_BUCKETS; i++) {
		while (c->pending[i]) {
			libvad_pending_finish(c, c->pending[i], c->dead_err, NULL, -1, &w);
			/* Answered threads never take the lock again: waking them here is safe. */
			if (w.n == sizeof(w.words) / sizeof(w.words[0]))
				libvad_wakes_flush(&w);
		}
	}
	libvad_wakes_flush(&w);
}

void libvad_wakes_flush(struct libvad_wakes *w)
{
	for (size_t i = 0; i < w->n; i++)
		syscall(SYS_futex, w->words[i], FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	w->n = 0;
}

bool libvad_pending_done(const struct libvad_pending *p)
{
	return __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == LIBVAD_DONE;
}

bool libvad_pending_sleep(vad_client *c, struct libvad_pending *p)
{
	__atomic_store_n(&p->state, LIBVAD_SLEEPING, __ATOMIC_RELAXED);
	c->sleepers++;
	pthread_mutex_unlock(&c->lock);
	for (;;) {
		/* Returns at once (EAGAIN) if the state already changed; EINTR and spurious
		 * wake-ups just look again. */
		syscall(SYS_futex, &p->state, FUTEX_WAIT_PRIVATE, LIBVAD_SLEEPING, NULL, NULL, 0);
		uint32_t s = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
		if (s == LIBVAD_DONE)
			return true;
		if (s == LIBVAD_WAITING)
			break;
	}
	pthread_mutex_lock(&c->lock);
	return false;
}
