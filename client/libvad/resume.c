/*
 * resume.c - carrying on across a daemon restart: when the connection drops (VAD_EGONE), a
 * call reconnects to the same socket with a bounded backoff, says hello again and resumes
 * the session with the identity and secret of the first hello, so the daemon gives the
 * holds it kept back to this client. Mappings stay: the daemon keeps the same arena files.
 * Never after vactl kill (VAD_EKILLED is final) nor after vad_close (the client is gone).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "sender.h"
#include "transport.h"

#define RECONNECT_DEFAULT_MS 30000u /* the daemon's default resume_grace */
#define BACKOFF_FIRST_MS     10u
#define BACKOFF_MAX_MS	     500u

/* The client whose reconnect runs on this thread: its own calls must not reconnect. */
static __thread vad_client *reconnecting;

uint32_t libvad_reconnect_default(void)
{
	const char *e = getenv("VAD_RECONNECT_MS");
	if (!e || !*e)
		return RECONNECT_DEFAULT_MS;
	char *end;
	unsigned long v = strtoul(e, &end, 10);
	return *end || v > 86400000ul ? RECONNECT_DEFAULT_MS : (uint32_t)v;
}

bool libvad_may_reconnect(vad_client *c, int err)
{
	return err == VAD_EGONE && c->reconnect_ms && c->resume_secret_len && reconnecting != c;
}

void libvad_resume_keep(vad_client *c, const Vad__HelloReply *h)
{
	/* Every hello's identity is kept aside: if the Resume that follows a reconnect fails,
	 * the connection goes on as that new session, and a later drop resumes it. */
	c->hello_secret_len = 0;
	if (h->resume_secret.len && h->resume_secret.len <= sizeof(c->hello_secret)) {
		c->hello_resume_id = h->resume_id;
		memcpy(c->hello_secret, h->resume_secret.data, h->resume_secret.len);
		c->hello_secret_len = h->resume_secret.len;
	}
	if (c->resume_secret_len)
		return; /* a resumed session keeps its first identity */
	c->resume_id = c->hello_resume_id;
	memcpy(c->resume_secret, c->hello_secret, c->hello_secret_len);
	c->resume_secret_len = c->hello_secret_len;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int dial(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(addr.sun_path))
		return -1;
	strcpy(addr.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int rc;
	do
		rc = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
	while (rc < 0 && errno == EINTR);
	if (rc < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Put fd in place of the dead connection, once no thread reads or sends on it. */
static void swap_connection(vad_client *c, int fd)
{
	pthread_mutex_lock(&c->lock);
	while (c->reading || c->sending) {
		pthread_mutex_unlock(&c->lock);
		sleep_ms(1);
		pthread_mutex_lock(&c->lock);
	}
	/* What VAD_MORE or other senders left queued never reached the old daemon: its
	 * tickets send it again once resumed. */
	libvad_drop_queued_locked(c);
	if (c->sock >= 0)
		close(c->sock);
	if (c->nonblocking)
		libvad_set_nonblocking(fd); /* the event loop's mode (vad_fd) stays */
	c->sock = fd;
	libvad_transport_destroy(c); /* buffers and unclaimed fds of the old connection */
	c->rpos = 0;
	__atomic_store_n(&c->dead_err, VAD_OK, __ATOMIC_RELAXED);
	c->conn_gen++;
	pthread_mutex_unlock(&c->lock);
}

/* Hello and Resume on the new connection. VAD_OK, VAD_ERESUME, or a connection error. */
static int hello_resume(vad_client *c)
{
	int err = libvad_say_hello(c, c->name);
	if (err != VAD_OK)
		return err;
	Vad__Resume rs = VAD__RESUME__INIT;
	rs.resume_id = c->resume_id;
	rs.secret.data = c->resume_secret;
	rs.secret.len = c->resume_secret_len;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_RESUME;
	req.resume = &rs;
	Vad__Response *r;
	err = libvad_rpc(c, &req, VAD__RESPONSE__RESULT_RESUME, &r, NULL);
	if (err == VAD_OK)
		vad__response__free_unpacked(r, NULL);
	return err;
}

/* The daemon came back without this session: what this client held is gone, and the arena
 * files may be new ones. Forget both (the old mappings stay mapped until vad_close, so old
 * pointers do not fault, but they are no longer shared memory of the daemon). The arena
 * records are retired, not freed: a call in flight on another thread may still hold one and
 * put a range record back through it when it fails. */
static void forget_session(vad_client *c)
{
	pthread_mutex_lock(&c->held_lock);
	libvad_held_destroy(c);
	pthread_mutex_unlock(&c->held_lock);
	/* Not map_lock: a thread mapping an arena holds it across the round trip, in which it
	 * may be the one reconnecting here (or wait for reconnect_lock, held by the thread that
	 * is); a mapping made meanwhile is refused by add_arena, as lost_gen moved. */
	pthread_mutex_lock(&c->arena_lock);
	for (size_t i = 0; i < c->n_arenas; i++)
		libvad_arena_retire(c, c->arenas[i]);
	c->n_arenas = 0;
	pthread_mutex_unlock(&c->arena_lock);
	/* The connection goes on as the session its hello made: a later drop resumes that. */
	c->resume_id = c->hello_resume_id;
	memcpy(c->resume_secret, c->hello_secret, c->hello_secret_len);
	c->resume_secret_len = c->hello_secret_len;
}

int libvad_reconnect(vad_client *c, uint64_t gen)
{
	pthread_mutex_lock(&c->reconnect_lock);
	pthread_mutex_lock(&c->lock);
	bool done = c->conn_gen != gen;
	bool gone = c->dead_err != VAD_OK;
	pthread_mutex_unlock(&c->lock);
	if (done || !gone) {
		pthread_mutex_lock(&c->lock);
		bool lost = c->lost_gen > gen;
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&c->reconnect_lock);
		if (done && lost)
			return libvad_failf(c, VAD_ERESUME,
					    "the daemon at %s restarted without this client's "
					    "session: every range this client held is lost",
					    c->socket_path);
		return done ? VAD_OK : VAD_EGONE;
	}
	reconnecting = c;
	uint64_t deadline = now_ms() + c->reconnect_ms;
	uint32_t delay = BACKOFF_FIRST_MS;
	int err = VAD_EGONE;
	for (;;) {
		int fd = dial(c->socket_path);
		if (fd >= 0) {
			swap_connection(c, fd);
			err = hello_resume(c);
			if (err == VAD_OK || err == VAD_ERESUME || err == VAD_EKILLED ||
			    err == VAD_EPERM || err == VAD_EVERSION)
				break;
		}
		if (now_ms() + delay > deadline)
			break;
		sleep_ms(delay);
		delay = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2;
	}
	if (err == VAD_ERESUME) {
		/* First, so that a ticket answered before the loss and waited for now does not
		 * take its ranges into the mappings of the new session. */
		pthread_mutex_lock(&c->lock);
		__atomic_store_n(&c->lost_gen, c->conn_gen, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&c->lock);
		forget_session(c);
	}
	reconnecting = NULL;
	pthread_mutex_unlock(&c->reconnect_lock);
	if (err == VAD_ERESUME)
		return libvad_failf(c, VAD_ERESUME,
				    "the daemon at %s restarted without this client's session (its "
				    "resume_grace passed, or its state was discarded): every range "
				    "this client held is lost; the client goes on as a new session",
				    c->socket_path);
	if (err != VAD_OK && err != VAD_EKILLED)
		return libvad_failf(c, VAD_EGONE,
				    "the daemon at %s went away and did not come back within %u ms "
				    "(VAD_RECONNECT_MS)",
				    c->socket_path, c->reconnect_ms);
	return err;
}

int vad_set_reconnect(vad_client *c, uint32_t max_ms)
{
	if (!c)
		return libvad_fail(c, VAD_EINVAL, "vad_set_reconnect: the client is NULL");
	c->reconnect_ms = max_ms;
	return VAD_OK;
}
