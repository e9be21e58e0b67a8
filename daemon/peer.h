/* peer.h - who is on the other end of a Unix socket: SO_PEERCRED, SO_PEERGROUPS, admin rights. */
#ifndef VAD_PEER_H
#define VAD_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct vad_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	gid_t *groups; /* supplementary groups (malloc'ed; NULL when none or unknown) */
	size_t n_groups;
};

/* Read the credentials of the process connected to fd. Returns 0, or -1 with a reason in err
 * and errno (ENOMEM when out of memory). */
int vad_peer_from_socket(int fd, struct vad_peer *out, char *err, size_t err_len);

/* Deep-copy a peer (for tests and hand-over). Returns 0, or -1 when out of memory. */
int vad_peer_copy(struct vad_peer *dst, const struct vad_peer *src);

/* Free the groups array. */
void vad_peer_free(struct vad_peer *p);

/* Is gid the peer's primary group or one of its supplementary groups? */
bool vad_peer_in_group(const struct vad_peer *p, gid_t gid);

/* May the peer use admin operations: root, the daemon's own uid, or a member of admin_gid? */
bool vad_peer_is_admin(const struct vad_peer *p, uid_t daemon_uid, bool has_admin_group,
		       gid_t admin_gid);

#endif
