/*
 * connect.c - connecting (to the socket connect_hint.c finds), saying hello, closing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "connect_hint.h"
#include "internal.h"
#include "transport.h"
#include "version.h"

/* Set *slot to the hello's now. A reconnect that brings the same string keeps the old copy;
 * one that brings another retires the old copy instead of freeing it (another thread may be
 * reading it: a call that names no arena, or vad_session_info's out, valid until vad_close). */
static int hello_string(vad_client *c, char **slot, const char *now)
{
	char *copy, **grown;

	if (*slot && strcmp(*slot, now) == 0)
		return VAD_OK;
	copy = strdup(now);
	if (!copy)
		return VAD_ENOMEM;
	if (*slot) {
		grown = realloc(c->retired, (c->n_retired + 1) * sizeof(*grown));
		if (!grown) {
			free(copy);
			return VAD_ENOMEM;
		}
		c->retired = grown;
		c->retired[c->n_retired++] = *slot;
	}
	*slot = copy;
	return VAD_OK;
}

/* vad.h is installed alone, so it spells the version out: it must be the one version. */
_Static_assert(__builtin_strcmp(VAD_VERSION_STRING, VAD_VERSION) == 0,
	       "VAD_VERSION_STRING in client/vad.h differs from VAD_VERSION in proto/version.h");

extern char *program_invocation_short_name;

static uint64_t next_generation; /* atomic; 0 is never handed out */

static int open_socket(vad_client *c, const struct libvad_target *t)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	_Static_assert(sizeof(t->path) <= sizeof(addr.sun_path), "a target fits sun_path");
	strcpy(addr.sun_path, t->path);
	c->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->sock < 0) {
		int e = errno;
		return libvad_failf(NULL, e == ENOMEM || e == ENOBUFS ? VAD_ENOMEM : VAD_ECONNECT,
				    "cannot create a socket for %s: %s", c->socket_path,
				    strerror(e));
	}
	int rc;
	do
		rc = connect(c->sock, (struct sockaddr *)&addr, sizeof(addr));
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return libvad_connect_failed(t, errno);
	return VAD_OK;
}

int libvad_say_hello(vad_client *c, const char *name)
{
	Vad__Hello hello = VAD__HELLO__INIT;
	hello.name = (char *)(name ? name : program_invocation_short_name);
	hello.version = VAD_PROTOCOL_VERSION;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_HELLO;
	req.hello = &hello;

	Vad__Response *r;
	int err = libvad_call(c, &req, &r, NULL);
	if (err != VAD_OK) {
		const char *why = libvad_dead_message(c);
		if (why)
			return libvad_failf(NULL, err,
					    "the daemon at %s refused the connection: %s",
					    c->socket_path, why);
		return libvad_failf(NULL, err, "no hello reply from the daemon at %s: %s",
				    c->socket_path, vad_strerror(err));
	}
	if (r->error != VAD__ERROR__OK) {
		err = libvad_code_from_wire(r->error);
		libvad_failf(NULL, err, "the daemon at %s refused the connection: %s",
			     c->socket_path, *r->message ? r->message : vad_strerror(err));
		vad__response__free_unpacked(r, NULL);
		return err;
	}
	if (r->result_case != VAD__RESPONSE__RESULT_HELLO) {
		vad__response__free_unpacked(r, NULL);
		return libvad_failf(NULL, VAD_EPROTO,
				    "the daemon at %s answered hello with something else",
				    c->socket_path);
	}
	Vad__HelloReply *h = r->hello;
	if (h->version != VAD_PROTOCOL_VERSION) {
		libvad_failf(NULL, VAD_EVERSION,
			     "the daemon at %s speaks protocol %u, this libvad speaks %u",
			     c->socket_path, h->version, VAD_PROTOCOL_VERSION);
		vad__response__free_unpacked(r, NULL);
		return VAD_EVERSION;
	}
	c->session_id = h->session_id;
	c->protocol_version = h->version;
	c->admin = h->admin;
	/* a reconnect says hello again */
	int rc = hello_string(c, &c->server, h->server);
	if (rc == VAD_OK)
		rc = hello_string(c, &c->default_arena, h->default_arena);
	libvad_resume_keep(c, h);
	vad__response__free_unpacked(r, NULL);
	if (rc != VAD_OK)
		return libvad_fail(NULL, VAD_ENOMEM, NULL);
	return VAD_OK;
}

int vad_connect(const char *socket_path, const char *name, vad_client **out)
{
	if (!out)
		return libvad_fail(NULL, VAD_EINVAL, "vad_connect: out is NULL");
	*out = NULL;
	vad_client *c = calloc(1, sizeof(*c));
	if (!c)
		return libvad_fail(NULL, VAD_ENOMEM, NULL);
	c->sock = -1;
	c->generation = __atomic_add_fetch(&next_generation, 1, __ATOMIC_RELAXED);
	/* Held for a few hundred instructions at a time by threads that call again at once:
	 * spinning briefly before sleeping saves a futex wait and wake per contended call. */
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&c->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_mutex_init(&c->map_lock, NULL);
	pthread_mutex_init(&c->arena_lock, NULL);
	pthread_mutex_init(&c->held_lock, NULL);
	pthread_mutex_init(&c->reconnect_lock, NULL);
	c->reconnect_ms = libvad_reconnect_default();
	c->name = strdup(name ? name : program_invocation_short_name);
	if (!c->name) {
		vad_close(c);
		return libvad_fail(NULL, VAD_ENOMEM, NULL);
	}
	struct libvad_target target;
	int err = libvad_target_resolve(socket_path, &target);
	if (err == VAD_OK) {
		c->socket_path = strdup(target.path);
		err =
		    c->socket_path ? open_socket(c, &target) : libvad_fail(NULL, VAD_ENOMEM, NULL);
	}
	if (err == VAD_OK)
		err = libvad_say_hello(c, name);
	if (err != VAD_OK) {
		vad_close(c);
		return err;
	}
	*out = c;
	return VAD_OK;
}

void vad_close(vad_client *c)
{
	if (!c)
		return;
	if (c->sock >= 0)
		close(c->sock);
	explicit_bzero(c->resume_secret, sizeof(c->resume_secret));
	explicit_bzero(c->hello_secret, sizeof(c->hello_secret));
	libvad_tickets_destroy(c);
	libvad_transport_destroy(c);
	libvad_held_destroy(c);
	libvad_arenas_destroy(c);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->map_lock);
	pthread_mutex_destroy(&c->arena_lock);
	pthread_mutex_destroy(&c->held_lock);
	pthread_mutex_destroy(&c->reconnect_lock);
	free(c->name);
	free(c->socket_path);
	free(c->server);
	free(c->default_arena);
	for (size_t i = 0; i < c->n_retired; i++)
		free(c->retired[i]);
	free(c->retired);
	free(c);
}

int vad_session_info(vad_client *c, struct vad_session *out)
{
	if (!c || !out)
		return libvad_fail(c, VAD_EINVAL, "vad_session_info: client or out is NULL");
	out->session_id = c->session_id;
	out->protocol_version = c->protocol_version;
	out->admin = c->admin;
	out->server = c->server;
	out->default_arena = c->default_arena;
	out->socket_path = c->socket_path;
	return VAD_OK;
}
