/*
 * waiters.c - the table of calls in flight and how their threads sleep and wake.
 *
 * A waiting call sleeps on the client's wake word with the bit of its id (FUTEX_WAIT_BITSET),
 * so the reader wakes the threads it answered with one FUTEX_WAKE_BITSET after releasing
 * c->lock, however many they are (a thread whose bit it shares wakes too, finds its state
 * unchanged and sleeps again). An answered thread never takes the lock again (it reads its
 * result after loading its state), so it does not queue on the lock behind the reader.
 */
#include <errno.h>
#include <limits.h>
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

static uint32_t wake_bit(const struct libvad_pending *p)
{
	return 1u << (p->id % 32);
}

/* Queue a wake of the thread of bit: bump the wake word (a thread about to sleep on its old
 * value returns at once) and note the bit. c->lock held, the waiter's state changed. The
 * bit is taken before that change: an answered waiter may return at once, and its record
 * (on its stack) is gone. */
static void wakes_add(vad_client *c, struct libvad_wakes *w, uint32_t bit)
{
	__atomic_add_fetch(&c->wake_word, 1, __ATOMIC_SEQ_CST);
	w->word = &c->wake_word;
	w->bits |= bit;
	w->n++;
}

void libvad_pending_finish(vad_client *c, struct libvad_pending *p, int err, Vad__Response *resp,
			   int fd, struct libvad_wakes *w)
{
	libvad_pending_remove(c, p);
	p->err = err;
	p->resp = resp;
	p->fd = fd;
	uint32_t bit = wake_bit(p);
	uint32_t was = __atomic_exchange_n(&p->state, LIBVAD_DONE, __ATOMIC_SEQ_CST);
	/* A waiter that is not asleep sees DONE before it would sleep (it checks under the
	 * lock): no wake needed. One asleep, or about to be, is woken (or finds the wake word
	 * moved). */
	if (was == LIBVAD_SLEEPING) {
		c->sleepers--;
		wakes_add(c, w, bit);
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
	uint32_t bit = wake_bit(oldest);
	__atomic_store_n(&oldest->state, LIBVAD_WAITING, __ATOMIC_SEQ_CST);
	wakes_add(c, w, bit);
}

void libvad_fail_all_locked(vad_client *c, int err)
{
	if (!c->dead_err) {
		__atomic_store_n(&c->dead_err, err, __ATOMIC_RELAXED);
		/* A broken stream may have a half-read frame in it; stop the daemon too, and
		 * wake a reader blocked in recvmsg. */
		shutdown(c->sock, SHUT_RDWR);
	}
	struct libvad_wakes w = {.n = 0};
	for (size_t i = 0; i < LIBVAD_PENDING_BUCKETS; i++)
		while (c->pending[i])
			libvad_pending_finish(c, c->pending[i], c->dead_err, NULL, -1, &w);
	/* Answered threads never take the lock again: waking them here is safe. */
	libvad_wakes_flush(&w);
}

void libvad_wakes_flush(struct libvad_wakes *w)
{
	if (w->n)
		syscall(SYS_futex, w->word, FUTEX_WAKE_BITSET_PRIVATE, INT_MAX, NULL, NULL,
			w->bits);
	w->n = 0;
	w->bits = 0;
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
		/* The word first: a change of state after this load moves the word too, so
		 * the wait below returns at once (EAGAIN). EINTR, a wake meant for a thread of
		 * the same bit and spurious wake-ups just look again. */
		uint32_t word = __atomic_load_n(&c->wake_word, __ATOMIC_SEQ_CST);
		uint32_t s = __atomic_load_n(&p->state, __ATOMIC_SEQ_CST);
		if (s == LIBVAD_DONE)
			return true;
		if (s == LIBVAD_WAITING)
			break;
		syscall(SYS_futex, &c->wake_word, FUTEX_WAIT_BITSET_PRIVATE, word, NULL, NULL,
			wake_bit(p));
	}
	pthread_mutex_lock(&c->lock);
	return false;
}
