/*
 * uid_peers.h - clients that run as other real uids: forked children of the test (which must be
 * root to switch) that talk to it in lines over two pipes. The test starts a peer with the
 * function it runs; the child uses the vt_child_* calls (VT_CHILD_CHECK on failure), the test
 * the vt_peer_* calls (cmocka's assertions).
 */
#ifndef VT_UID_PEERS_H
#define VT_UID_PEERS_H

#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

/* How long one line from the other side may take. */
#define VT_PEER_LINE_TIMEOUT vt_timeout_ms(20000)

/* A child running as another uid, and the pipes to talk to it. */
struct vt_peer {
	pid_t pid;
	int to, from; /* lines to the child, lines from it */
};

/* What a peer runs: ctx as given to vt_peer_start, in and out the pipe ends to the test. */
typedef void (*vt_peer_fn)(void *ctx, int in, int out);

/* Fill ids[0..n) with ids from first up that no user and no group has; 0, or -1 (printed). */
int vt_pick_unused_ids(unsigned first, unsigned *ids, size_t n);

/* Fork a child that becomes uid and gid id with groups as its supplementary groups and runs
 * fn(ctx, in, out), then exits 0. */
void vt_peer_start(unsigned id, const gid_t *groups, size_t n_groups, vt_peer_fn fn, void *ctx,
		   struct vt_peer *p);

/* The next line from p, which must start with word: what follows it (in buf). */
const char *vt_peer_expect(struct vt_peer *p, const char *word, char *buf, size_t len);

/* Send one line to p. */
void vt_peer_send(struct vt_peer *p, const char *line);

/* Close the pipe to p and wait for it to exit; it must exit 0 (what names it in a failure). */
void vt_peer_finish(struct vt_peer *p, const char *what);

/* In the child: send a formatted line to the test. */
void vt_child_send(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* In the child: the next line from the test, which must start with word: what follows it. */
const char *vt_child_expect(int fd, const char *word, char *buf, size_t len);

/* In the child: connect to d with libvad as name. */
vad_client *vt_child_connect(const struct vt_daemon *d, const char *name);

#endif
