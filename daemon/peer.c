/* peer.c - peer credentials of a Unix socket; see peer.h. */
#include "peer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

/* Supplementary groups; a kernel without SO_PEERGROUPS leaves the list empty. */
static int read_groups(int fd, struct vad_peer *p)
{
	socklen_t len = 32 * sizeof(gid_t);
	for (int tries = 0; tries < 4; tries++) {
		gid_t *g = malloc(len ? len : sizeof(gid_t));
		if (!g)
			return -1;
		socklen_t got = len;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &got) == 0) {
			p->groups = g;
			p->n_groups = got / sizeof(gid_t);
			return 0;
		}
		free(g);
		if (errno != ERANGE)
			return 0; /* ENOPROTOOPT on old kernels: no supplementary groups known */
		len = got > len ? got : len * 2; /* the kernel says how much it needs */
	}
	return 0;
}

int vad_peer_from_socket(int fd, struct vad_peer *out, char *err, size_t err_len)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	memset(out, 0, sizeof(*out));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		snprintf(err, err_len, "cannot read the peer's credentials (SO_PEERCRED): %s",
			 strerror(errno));
		return -1;
	}
	out->pid = cred.pid;
	out->uid = cred.uid;
	out->gid = cred.gid;
	if (read_groups(fd, out) < 0) {
		snprintf(err, err_len, "the daemon is out of memory reading the peer's groups");
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

int vad_peer_copy(struct vad_peer *dst, const struct vad_peer *src)
{
	*dst = *src;
	dst->groups = NULL;
	if (src->n_groups) {
		dst->groups = malloc(src->n_groups * sizeof(gid_t));
		if (!dst->groups) {
			dst->n_groups = 0;
			return -1;
		}
		memcpy(dst->groups, src->groups, src->n_groups * sizeof(gid_t));
	}
	return 0;
}

void vad_peer_free(struct vad_peer *p)
{
	free(p->groups);
	p->groups = NULL;
	p->n_groups = 0;
}

bool vad_peer_in_group(const struct vad_peer *p, gid_t gid)
{
	if (p->gid == gid)
		return true;
	for (size_t i = 0; i < p->n_groups; i++)
		if (p->groups[i] == gid)
			return true;
	return false;
}

bool vad_peer_is_admin(const struct vad_peer *p, uid_t daemon_uid, bool has_admin_group,
		       gid_t admin_gid)
{
	if (p->uid == 0 || p->uid == daemon_uid)
		return true;
	return has_admin_group && vad_peer_in_group(p, admin_gid);
}
