/* vadutil.c - libvad conveniences: connect, daemon-wide stats, purge, waiting for baselines. */
#include <string.h>

#include "harness.h"

int vt_connect(const struct vt_daemon *d, const char *name, vad_client **out)
{
	int rc = vad_connect(d->socket_path, name, out);
	if (rc != 0)
		fprintf(stderr, "harness: vad_connect(%s) as %s: %d %s\n", d->socket_path,
			name ? name : "(null)", rc, vad_strerror(rc));
	return rc;
}

int vt_stats(const struct vt_daemon *d, struct vad_stats *out)
{
	vad_client *c;
	if (vt_connect(d, "harness-stats", &c) != 0)
		return -1;
	int rc = vad_stats(c, out);
	if (rc != 0)
		fprintf(stderr, "harness: vad_stats: %d %s\n", rc, vad_last_error(c));
	vad_close(c);
	return rc == 0 ? 0 : -1;
}

int vt_purge(const struct vt_daemon *d)
{
	vad_client *c;
	if (vt_connect(d, "harness-purge", &c) != 0)
		return -1;
	uint64_t released = 0;
	int rc = vad_purge(c, &released);
	if (rc != 0)
		fprintf(stderr, "harness: vad_purge: %d %s\n", rc, vad_last_error(c));
	vad_close(c);
	return rc == 0 ? 0 : -1;
}

int vt_check_invariants(const struct vt_daemon *d)
{
	vad_client *c;
	if (vt_connect(d, "harness-check", &c) != 0)
		return -1;
	int ok = 0;
	char *detail = NULL;
	int rc = vad_check(c, &ok, &detail);
	if (rc != 0)
		fprintf(stderr, "harness: vad_check: %d %s\n", rc, vad_last_error(c));
	else if (!ok)
		fprintf(stderr, "harness: allocator invariants broken: %s\n",
			detail ? detail : "(no detail)");
	free(detail);
	vad_close(c);
	return rc == 0 && ok ? 0 : -1;
}

int vt_wait_busy(const struct vt_daemon *d, uint64_t busy, uint32_t clients, int timeout_ms,
		 struct vad_stats *last)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	struct vad_stats s = {0};
	for (;;) {
		if (vt_stats(d, &s) == 0 && s.busy_bytes == busy &&
		    (clients == UINT32_MAX || s.clients == clients))
			break;
		if (vt_now_ns() >= deadline) {
			fprintf(stderr,
				"harness: busy_bytes %llu (want %llu), clients %u (want %d) after "
				"%d ms\n",
				(unsigned long long)s.busy_bytes, (unsigned long long)busy,
				s.clients, clients == UINT32_MAX ? -1 : (int)clients, timeout_ms);
			if (last)
				*last = s;
			return -1;
		}
		vt_sleep_ms(10);
	}
	if (last)
		*last = s;
	return 0;
}

int vt_wait_fds(const struct vt_daemon *d, int fds, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	int n;
	while ((n = vt_fd_count(d->pid)) > fds && vt_now_ns() < deadline)
		vt_sleep_ms(10);
	return n;
}
