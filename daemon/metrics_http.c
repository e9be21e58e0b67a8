/* metrics_http.c - the HTTP /metrics listener; see metrics_http.h. Hand-written over
 * bufferevents rather than evhttp: libevent 2.1's evhttp has no connection limit and no way to
 * refuse or push out an accepted connection, which is the first thing a hostile peer tries. */
#include "metrics_http.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "latency.h"
#include "listen_addr.h"
#include "log.h"
#include "metrics.h"

struct http_conn {
	struct vad_metrics_http *h;
	struct bufferevent *bev;
	struct event *deadline;
	bool replied;		       /* the reply is queued: wait for it to go out, then close */
	struct http_conn *prev, *next; /* oldest first */
};

struct vad_metrics_http {
	struct vad_service *svc;
	char addr[VAD_LISTEN_ADDR_MAX];
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *ev_stop;	  /* made active by vad_metrics_http_stop from another thread */
	struct event *ev_resume;  /* accepting again after a failed accept */
	uint64_t accept_noted_ns; /* when a failed accept was last logged */
	pthread_t thread;
	struct http_conn *oldest, *newest;
	unsigned n_conns;
	uint64_t refused, pushed_out; /* since the last note in the log */
	uint64_t noted_ns;	      /* when refusals were last logged */
	char *text;		      /* the last rendering, NULL before the first */
	size_t text_len;
	uint64_t text_ns;
};

static void conn_close(struct http_conn *c)
{
	struct vad_metrics_http *h = c->h;
	if (c->prev)
		c->prev->next = c->next;
	else
		h->oldest = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		h->newest = c->prev;
	h->n_conns--;
	event_free(c->deadline);
	bufferevent_free(c->bev); /* closes the socket */
	free(c);
}

/* Refusals and push-outs are logged at most every 10 s, so a flood cannot flood the log. */
static void note_refusal(struct vad_metrics_http *h, bool pushed_out)
{
	if (pushed_out)
		h->pushed_out++;
	else
		h->refused++;
	uint64_t now = vad_now_ns();
	if (h->noted_ns && now - h->noted_ns < 10000000000ull)
		return;
	log_warn("metrics %s: %u connections open (the most it keeps): %llu refused, %llu pushed "
		 "out before sending a request, since the last such line",
		 h->addr, h->n_conns, (unsigned long long)h->refused,
		 (unsigned long long)h->pushed_out);
	h->noted_ns = now;
	h->refused = h->pushed_out = 0;
}

static void arm_deadline(struct http_conn *c, unsigned ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (suseconds_t)(ms % 1000) * 1000};
	event_add(c->deadline, &tv);
}

/* The rendered text, at most METRICS_HTTP_RENDER_EVERY ms old; NULL when out of memory. */
static const char *current_text(struct vad_metrics_http *h, size_t *len)
{
	uint64_t now = vad_now_ns();
	if (!h->text || now - h->text_ns >= METRICS_HTTP_RENDER_EVERY * 1000000ull) {
		size_t n;
		char *t = vad_metrics_render(h->svc, NULL, NULL, &n);
		if (t) {
			free(h->text);
			h->text = t;
			h->text_len = n;
			h->text_ns = now;
		} else if (!h->text) {
			return NULL;
		}
	}
	*len = h->text_len;
	return h->text;
}

static void reply(struct http_conn *c, const char *status, const char *extra, const char *body,
		  size_t len, bool head_only)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	evbuffer_add_printf(out,
			    "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
			    "Connection: close\r\n\r\n",
			    status,
			    body && strncmp(status, "200", 3) == 0
				? "text/plain; version=0.0.4; charset=utf-8"
				: "text/plain; charset=utf-8",
			    len, extra ? extra : "");
	if (!head_only && len)
		evbuffer_add(out, body, len);
	c->replied = true;
	arm_deadline(c, METRICS_HTTP_REPLY_MS);
	bufferevent_enable(c->bev, EV_WRITE);
}

static void reply_text(struct http_conn *c, const char *status, const char *extra,
		       const char *sentence, bool head_only)
{
	reply(c, status, extra, sentence, strlen(sentence), head_only);
}

/* The request head is in: answer it. */
static void answer(struct http_conn *c, char *line)
{
	char *save = NULL; /* strtok_r: other threads of the daemon may tokenize too */
	char *method = strtok_r(line, " ", &save);
	char *target = method ? strtok_r(NULL, " ", &save) : NULL;
	char *version = target ? strtok_r(NULL, " ", &save) : NULL;
	if (!version || strncmp(version, "HTTP/1.", 7) != 0 || strtok_r(NULL, " ", &save)) {
		reply_text(c, "400 Bad Request", NULL,
			   "expected a request line: GET /metrics HTTP/1.1\n", false);
		return;
	}
	bool get = strcmp(method, "GET") == 0, head = strcmp(method, "HEAD") == 0;
	char *query = strchr(target, '?');
	if (query)
		*query = '\0';
	if (strcmp(target, "/metrics") != 0) {
		reply_text(c, "404 Not Found", NULL, "vad serves only /metrics\n", head);
		return;
	}
	if (!get && !head) {
		reply_text(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n",
			   "/metrics answers GET and HEAD only\n", false);
		return;
	}
	size_t len;
	const char *text = current_text(c->h, &len);
	if (!text) {
		reply_text(c, "503 Service Unavailable", NULL,
			   "the daemon is out of memory for the metrics text\n", head);
		return;
	}
	reply(c, "200 OK", NULL, text, len, head);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	if (c->replied) { /* anything after the request is ignored */
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (end.pos < 0)
		end = evbuffer_search(in, "\n\n", 2, NULL);
	if (end.pos < 0) {
		if (evbuffer_get_length(in) > METRICS_HTTP_MAX_HEAD)
			reply_text(c, "431 Request Header Fields Too Large", NULL,
				   "the request head passed 8 KiB\n", false);
		return;
	}
	if ((size_t)end.pos > METRICS_HTTP_MAX_HEAD) {
		reply_text(c, "431 Request Header Fields Too Large", NULL,
			   "the request head passed 8 KiB\n", false);
		return;
	}
	char *line = evbuffer_readln(in, NULL, EVBUFFER_EOL_CRLF);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (!line) {
		reply_text(c, "400 Bad Request", NULL, "no request line\n", false);
		return;
	}
	answer(c, line);
	free(line);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;
	if (c->replied && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		conn_close(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct http_conn *c = arg;
	/* A peer that shut down its side after the request still reads the reply. */
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) && c->replied &&
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
		bufferevent_disable(bev, EV_READ);
		return;
	}
	conn_close(c);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_close(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	(void)l;
	(void)sa;
	(void)len;
	struct vad_metrics_http *h = arg;
	if (h->n_conns >= METRICS_HTTP_MAX_CONNS) {
		struct http_conn *idle = h->oldest;
		while (idle && idle->replied)
			idle = idle->next;
		if (!idle) { /* every slot is sending a reply: those end by their deadline */
			close(fd);
			note_refusal(h, false);
			return;
		}
		conn_close(idle);
		note_refusal(h, true);
	}
	struct http_conn *c = calloc(1, sizeof(*c));
	if (c)
		c->bev = bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c && c->bev)
		c->deadline = event_new(h->base, -1, 0, on_deadline, c);
	if (!c || !c->bev || !c->deadline) {
		if (c && c->bev)
			bufferevent_free(c->bev);
		else
			close(fd);
		free(c);
		return;
	}
	c->h = h;
	c->prev = h->newest;
	if (h->newest)
		h->newest->next = c;
	else
		h->oldest = c;
	h->newest = c;
	h->n_conns++;
	bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
	bufferevent_enable(c->bev, EV_READ);
	arm_deadline(c, METRICS_HTTP_HEAD_MS);
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

/* A failed accept (EMFILE, ENFILE, ENOBUFS, ENOMEM) leaves the socket readable: pause for
 * METRICS_HTTP_ACCEPT_PAUSE_MS rather than spin, and log it at most every 10 s. */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
	struct vad_metrics_http *h = arg;
	int e = EVUTIL_SOCKET_ERROR();
	uint64_t now = vad_now_ns();
	if (!h->accept_noted_ns || now - h->accept_noted_ns >= 10000000000ull) {
		log_warn("metrics %s: accept failed: %s; pausing /metrics for %d ms", h->addr,
			 evutil_socket_error_to_string(e), METRICS_HTTP_ACCEPT_PAUSE_MS);
		h->accept_noted_ns = now;
	}
	evconnlistener_disable(l);
	struct timeval tv = {.tv_sec = 0, .tv_usec = METRICS_HTTP_ACCEPT_PAUSE_MS * 1000};
	event_add(h->ev_resume, &tv);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct vad_metrics_http *h = arg;
	evconnlistener_enable(h->listener);
}

static void *metrics_main(void *arg)
{
	struct vad_metrics_http *h = arg;
	pthread_setname_np(pthread_self(), "vad-metrics");
	if (event_base_dispatch(h->base) < 0)
		log_err("metrics %s: the event loop failed; /metrics no longer answers", h->addr);
	return NULL;
}

static void metrics_free(struct vad_metrics_http *h)
{
	while (h->oldest)
		conn_close(h->oldest);
	if (h->listener)
		evconnlistener_free(h->listener);
	if (h->ev_stop)
		event_free(h->ev_stop);
	if (h->ev_resume)
		event_free(h->ev_resume);
	if (h->base)
		event_base_free(h->base);
	free(h->text);
	free(h);
}

struct vad_metrics_http *vad_metrics_http_start(struct vad_service *svc, const char *addr,
						char *err, size_t err_len)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char why[160];
	if (vad_listen_addr_parse(addr, &ss, &len, why, sizeof(why)) != 0) {
		snprintf(err, err_len, "metrics_listen = %s: %s", addr, why);
		return NULL;
	}
	struct vad_metrics_http *h = calloc(1, sizeof(*h));
	if (!h || !(h->base = event_base_new())) {
		snprintf(err, err_len, "metrics_listen = %s: out of memory", addr);
		if (h)
			metrics_free(h);
		return NULL;
	}
	h->svc = svc;
	snprintf(h->addr, sizeof(h->addr), "%s", addr);
	h->listener = evconnlistener_new_bind(
	    h->base, on_accept, h,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
	    METRICS_HTTP_MAX_CONNS, (struct sockaddr *)&ss, (int)len);
	if (!h->listener) {
		int e = errno;
		/* vad.service allows only AF_UNIX and has no network of its own. */
		bool sandboxed = e == EAFNOSUPPORT || e == EPERM || e == EACCES;
		snprintf(err, err_len, "metrics_listen = %s: cannot listen there: %s%s", addr,
			 strerror(e),
			 sandboxed ? " (under systemd, vad.service allows only Unix sockets: add "
				     "the drop-in of vad.conf(5), metrics_listen)"
				   : "");
		metrics_free(h);
		return NULL;
	}
	h->ev_stop = event_new(h->base, -1, 0, on_stop, h->base);
	h->ev_resume = event_new(h->base, -1, 0, on_resume, h);
	evconnlistener_set_error_cb(h->listener, on_accept_error);
	if (!h->ev_stop || !h->ev_resume) {
		snprintf(err, err_len, "metrics_listen = %s: out of memory", addr);
		metrics_free(h);
		return NULL;
	}
	int e = pthread_create(&h->thread, NULL, metrics_main, h);
	if (e) {
		snprintf(err, err_len, "metrics_listen = %s: cannot start its thread: %s", addr,
			 strerror(e));
		metrics_free(h);
		return NULL;
	}
	log_info("metrics: serving http://%s/metrics", addr);
	return h;
}

void vad_metrics_http_stop(struct vad_metrics_http *h)
{
	if (!h)
		return;
	/* An activation is kept until the loop runs it (a loopbreak before the loop starts would be
	 * forgotten); thread-safe, as the daemon uses evthread_use_pthreads. */
	event_active(h->ev_stop, EV_READ, 0);
	pthread_join(h->thread, NULL);
	metrics_free(h);
}
