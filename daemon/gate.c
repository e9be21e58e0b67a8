/* gate.c - the daemon's door: connection slots, rate-limited notes, refusals; see gate.h. */
#include "gate.h"

#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "latency.h"
#include "log.h"
#include "service.h"
#include "session.h"

void vad_gate_release(struct vad_gate *g, uid_t uid)
{
	vad_uid_conns_drop(g->uid_conns, uid);
	__atomic_sub_fetch(&g->svc->clients, 1, __ATOMIC_RELAXED);
}

bool vad_gate_note(struct vad_gate *g, enum vad_note_kind kind, uid_t uid, pid_t pid)
{
	enum vad_note_verdict v = vad_notes_hit(&g->notes, kind, vad_now_ns(), uid, pid);
	if (v == VAD_NOTE_COUNT_ARM) {
		/* From a worker too: the listener base is locked (evthread_use_pthreads). */
		struct timeval tv = {.tv_sec = VAD_NOTE_INTERVAL_S};
		if (event_add(g->ev_notes, &tv) < 0)
			log_warn("%s: cannot arm the summary timer (out of memory); this one and "
				 "later ones may go uncounted in the log",
				 vad_note_what(kind));
	}
	return v == VAD_NOTE_LOG;
}

void vad_gate_refuse(int fd, Vad__Error code, const char *message)
{
	uint8_t buf[512];
	size_t len = vad_encode_error_frame(buf, sizeof(buf), 0, code, message);
	if (len)
		(void)!send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}
