/* fdpass.c - SCM_RIGHTS send/receive; see fdpass.h. */
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* The kernel passes at most SCM_MAX_FD (253) fds per message; room for all of them means
 * MSG_CTRUNC only happens on something other than fds (which we never ask for). */
#define FDPASS_MAX_KERNEL 253

ssize_t vad_send_with_fd(int sock, const void *buf, size_t len, int fd)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	if (len == 0 && fd >= 0) {
		errno = EINVAL; /* an fd must ride on at least one byte of a stream */
		return -1;
	}
	if (fd >= 0) {
		memset(&control, 0, sizeof(control));
		msg.msg_control = control.buf;
		msg.msg_controllen = sizeof(control.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		return n;
	}
}

ssize_t vad_recv_with_fds(int sock, void *buf, size_t cap, int *fds, size_t max_fds, size_t *n_fds)
{
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	union {
		char buf[CMSG_SPACE(FDPASS_MAX_KERNEL * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct msghdr msg;
	ssize_t n;

	if (n_fds)
		*n_fds = 0;
	for (;;) {
		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = control.buf;
		msg.msg_controllen = sizeof(control.buf);
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	if (n < 0)
		return -1;

	size_t kept = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (fds && kept < max_fds && !(msg.msg_flags & MSG_CTRUNC))
				fds[kept++] = fd;
			else
				close(fd);
		}
	}
	if (msg.msg_flags & MSG_CTRUNC) {
		for (size_t i = 0; i < kept; i++)
			close(fds[i]);
		errno = EMSGSIZE;
		return -1;
	}
	if (n_fds)
		*n_fds = kept;
	return n;
}
