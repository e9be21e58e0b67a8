/*
 * fdpass.h - sending and receiving file descriptors with stream bytes (SCM_RIGHTS).
 *
 * The daemon attaches an arena's fd to the first byte of a MapArena response frame and
 * sends the rest of the frame (if the first send was partial) without it. On a stream
 * socket the fd therefore arrives together with the first byte of that frame: a receiver
 * that reads with plain read(2) silently loses it (the kernel closes it).
 *
 * Clients must therefore always receive with vad_recv_with_fds and queue the fds in arrival
 * order; each MapArena reply, once decoded, takes the oldest queued fd. The daemon reads
 * requests with plain reads: fds a client sends are never installed in the daemon.
 */
#ifndef VAD_FDPASS_H
#define VAD_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* Send buf[0..len) on sock with fd attached by SCM_RIGHTS (fd < 0: no fd), MSG_NOSIGNAL,
 * retrying EINTR. Returns the bytes sent (possibly fewer than len: the fd went with them,
 * send the rest without it) or -1 with errno (EAGAIN on a full non-blocking socket: nothing
 * was sent, the fd was not passed). */
ssize_t vad_send_with_fd(int sock, const void *buf, size_t len, int fd);

/* Receive up to cap bytes into buf, collecting passed fds (MSG_CMSG_CLOEXEC) into
 * fds[0..max_fds) and their number into *n_fds; fds beyond max_fds are closed. Returns the
 * bytes read (0 at end of stream) or -1 with errno; EINTR is retried. If the kernel had to
 * drop fds (MSG_CTRUNC, only possible when a peer passes more than 253 at once) the fds
 * received are closed and -1 is returned with errno EMSGSIZE: the stream no longer matches
 * its fds and the connection must be closed. */
ssize_t vad_recv_with_fds(int sock, void *buf, size_t cap, int *fds, size_t max_fds, size_t *n_fds);

#endif
