/*
 * guess.h - what failed attaches cost a session (guess.c). Every attach refused for its token
 * is counted; one that names no token the daemon knows (malformed, or neither live nor among
 * the dead ones remembered) is a guess. Tokens are 190 random bits, so guessing one is
 * hopeless, but each guess costs the daemon a lookup and a log line: past VAD_GUESS_FREE
 * guesses each further one pauses the session (its connection is not read and its pipelined
 * requests wait, on a timer of its worker: the other sessions of that worker notice nothing),
 * and at VAD_GUESS_CLOSE it gets its reply and is closed. A refusal for a token that really
 * existed (revoked, expired, used, freed) is no guess: consumers racing for a single-use
 * token, or attaching after its producer freed it, are doing nothing wrong.
 */
#ifndef VAD_GUESS_H
#define VAD_GUESS_H

#include <stdbool.h>
#include <stdint.h>

struct vad_session;

/* Guesses a session makes at full speed: a genuine client mistypes a token or passes it on
 * truncated a few times, not this many. */
#define VAD_GUESS_FREE 16u

/* The guess that closes the session: after VAD_GUESS_FREE free ones, 15 paused ones (about
 * 9 s of pauses) show it keeps guessing; reconnecting starts it over, but connections are
 * limited per uid (max_clients_uid) and each new one costs it a hello. */
#define VAD_GUESS_CLOSE 32u

/* The pause after the first guess past VAD_GUESS_FREE, doubling with each further one up to
 * VAD_GUESS_PAUSE_MAX_MS: a guesser's rate falls to one guess a second within seven. */
#define VAD_GUESS_PAUSE_MS     10u
#define VAD_GUESS_PAUSE_MAX_MS 1000u

/* How long the session pauses after its guesses-th guess (0: not at all). */
uint32_t vad_guess_pause_ms(unsigned guesses);

/* Count an attach refused for its token, with the reply's sentence: logged within the
 * session's log rate limit; a guess may pause the session (vad_session_paused) or close it. */
void vad_session_attach_failed(struct vad_session *s, bool guess, const char *sentence);

/* Is s paused: its input must not be read or handled until vad_session_resume? */
bool vad_session_paused(const struct vad_session *s);

/* How long s's current pause lasts (0: not paused). */
uint32_t vad_session_pause_ms(const struct vad_session *s);

/* The pause is over: s handles input again. */
void vad_session_resume(struct vad_session *s);

#endif
