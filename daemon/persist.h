/*
 * persist.h - a restart without losing anything: the arena files and the state file kept in
 * the service manager's fd store (fdstore.h), and at the next start the arenas taken back,
 * every live range and holder rebuilt from the state file (state.h), checked, and only then
 * READY. The holds of sessions that were connected are kept by holders without a session for
 * resume_grace, then dropped as a disconnect would drop them; share tokens come back on their
 * ranges. Tenant arenas are stored when they open (a keeper set on the tenants, tenants.h),
 * removed when they close, and taken back at start before the holds are loaded.
 *
 * Start-up order (main.c): vad_persist_begin (take the stored fds, open the newest state
 * file), vad_persist_open_arenas (each configured arena: its stored file, checked, or a fresh
 * one), the server, vad_persist_restore (rebuild, verify, store the new state file and the
 * fresh arenas), READY; at the end vad_persist_end, the server's destruction, vad_persist_free.
 * A state that fails a check is refused: the daemon does not start and
 * the stored fds stay stored; --discard-state drops them and starts empty.
 */
#ifndef VAD_PERSIST_H
#define VAD_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "arena.h"
#include "config.h"

struct vad_persist;
struct vad_holder;
struct vad_service;

/* Take the stored fds and open the newest stored state file (discard: drop them all from the
 * store instead). NULL (with a sentence in err) when the stored state cannot be read. */
struct vad_persist *vad_persist_begin(bool discard, char *err, size_t err_len);

/* Open the configured arenas into arenas[cfg->n_arenas] (NULL for a section with tenancy):
 * an arena's stored file if there is one (its size, seals and identity checked against the
 * config and the state file), else a fresh one. 0, or -1 with a sentence in err (nothing left
 * open). */
int vad_persist_open_arenas(struct vad_persist *p, const struct vad_config *cfg,
			    struct vad_arena **arenas, char *err, size_t err_len);

/* Rebuild svc's allocators and registry from the stored state, verify them (va_check, the
 * registry check), write them into a fresh state file, hand it and the fresh arenas to the
 * fd store, and start the grace timer of the holds nobody resumed; tenant arenas and share
 * tokens with them. 0, or -1 with a sentence in err: then nothing was stored or removed, and
 * the daemon must not start. */
int vad_persist_restore(struct vad_persist *p, struct vad_service *svc,
			const struct vad_config *cfg, char *err, size_t err_len);

/* The result of vad_persist_resume. */
struct vad_resumed {
	uint64_t holds, refs, bytes;
	uint32_t secret_rec; /* the session record, now the resuming session's */
};

/* Give the holds of the previous daemon's session id to dst (a holder that holds nothing),
 * if secret is that session's (compared in constant time), uid was its uid, and resume_grace
 * has not dropped it. 0, or -1 when it cannot (unknown, expired, another uid, wrong secret:
 * one answer for all, so a guesser learns nothing). Thread-safe. */
int vad_persist_resume(struct vad_persist *p, struct vad_holder *dst, uint64_t id, uid_t uid,
		       const uint8_t *secret, size_t secret_len, struct vad_resumed *out);

/* A polite stop begins: from now on the state file is left as it is (drops and grants are
 * not recorded) and free ranges are not punched, so the next daemon finds every hold of this
 * moment with its data. Thread-safe; nothing without a state file. */
void vad_persist_freeze(struct vad_service *svc);

/* The daemon stops (its workers have): freeze the state file, stop the grace timer and give
 * up the holds it kept (their records stay), before the service goes. */
void vad_persist_end(struct vad_persist *p);

/* Before the service goes, for a restart in place (SIGUSR2, vactl restart): keep a copy of
 * the arenas' and the state file's fds past the service's end. -1 (logged) when it cannot. */
int vad_persist_prepare_exec(struct vad_persist *p);

/* Re-execute vad (/proc/self/exe, argv) with the fds kept by vad_persist_prepare_exec at 3, 4,
 * ... and LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID (our own pid: exec keeps it) set, as the
 * service manager would start it. Returns only on failure (logged). */
void vad_persist_exec(struct vad_persist *p, char **argv);

/* Close the state files and free p: after the service is gone (its registry points at the
 * state file until then), or after a failed start. */
void vad_persist_free(struct vad_persist *p);

#endif
