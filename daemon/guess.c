/* guess.c - counting a session's failed attaches, and pausing or closing one that guesses
 * tokens; see guess.h. Runs on the session's worker (or the test driving it): no lock. */
#include "guess.h"

#include <stdio.h>

#include "log.h"
#include "session.h"

uint32_t vad_guess_pause_ms(unsigned guesses)
{
	if (guesses <= VAD_GUESS_FREE)
		return 0;
	unsigned doublings = guesses - VAD_GUESS_FREE - 1;
	if (doublings >= 16)
		return VAD_GUESS_PAUSE_MAX_MS;
	uint64_t ms = (uint64_t)VAD_GUESS_PAUSE_MS << doublings;
	return ms < VAD_GUESS_PAUSE_MAX_MS ? (uint32_t)ms : VAD_GUESS_PAUSE_MAX_MS;
}

/* The guess that ends s: one log line (outside the session's bucket, which its guesses have
 * emptied, but within the daemon-wide one) and one event, then the connection closes once its
 * replies are out. */
static void close_guesser(struct vad_session *s, uint64_t failures)
{
	char text[384];
	snprintf(text, sizeof(text),
		 "session %llu (pid %d, uid %u, '%s') guessed %u share tokens that do not exist "
		 "(%llu failed attaches); closing it",
		 (unsigned long long)s->id, (int)s->peer.pid, (unsigned)s->peer.uid, s->name,
		 s->guesses, (unsigned long long)failures);
	if (vad_log_enabled(VAD_LOG_NOTICE) && vad_service_client_log(s->svc, VAD_LOG_NOTICE))
		vad_log(VAD_LOG_NOTICE, "%s", text);
	vad_session_event(s, "token-guessing", text);
	s->closing = true;
	s->closing_why = "it kept guessing share tokens";
}

void vad_session_attach_failed(struct vad_session *s, bool guess, const char *sentence)
{
	uint64_t failures = __atomic_add_fetch(&s->attach_failures, 1, __ATOMIC_RELAXED);
	if (guess && ++s->guesses >= VAD_GUESS_CLOSE) {
		close_guesser(s, failures);
		return;
	}
	uint32_t pause = guess ? vad_guess_pause_ms(s->guesses) : 0;
	char paused[96] = "";
	if (pause) {
		s->pause_ms = pause;
		snprintf(paused, sizeof(paused), ", %u guesses; its next request waits %u ms",
			 s->guesses, pause);
	}
	vad_session_log(s, VAD_LOG_INFO,
			"session %llu (pid %d, uid %u, '%s'): attach refused (%llu failed "
			"attaches%s): %s",
			(unsigned long long)s->id, (int)s->peer.pid, (unsigned)s->peer.uid, s->name,
			(unsigned long long)failures, paused, sentence);
}

bool vad_session_paused(const struct vad_session *s)
{
	return s->pause_ms != 0;
}

uint32_t vad_session_pause_ms(const struct vad_session *s)
{
	return s->pause_ms;
}

void vad_session_resume(struct vad_session *s)
{
	s->pause_ms = 0;
}
