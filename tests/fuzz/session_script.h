/*
 * session_script.h - the input format of fuzz_session: a script of steps over a few
 * sessions, shared by the fuzzer (which runs it) and gen_corpus (which writes seeds from
 * real requests).
 *
 * Each step starts with one control byte c:
 *   session = c & 3 (taken modulo FS_SESSIONS)
 *   action  = (c >> 2) & 7
 *   arg     = c >> 5 (0..7)
 * Actions:
 *   FS_FEED       the next byte n, then n + 1 bytes fed to the session: the stream is cut
 *                 into chunks wherever the script says, so frames split at any point
 *   FS_FEED_BIG   the next two bytes (little-endian) n, then n + 1 bytes fed in one go
 *   FS_DRAIN      the "client" reads every pending reply (recording share tokens)
 *   FS_DRAIN_SOME the client reads only (arg + 1) * 61 bytes, leaving a partial frame
 *   FS_ATTACH     feed an Attach request for share token number arg seen so far (tokens
 *                 are random, so the fuzzer cannot type them)
 *   FS_REOPEN     close the session (as a disconnect would) and open a new one as peer arg
 *   FS_PURGE      drain every arena's lazy lists and pools (what purge or the idle timer do)
 *   FS_CHECK      run the registry and allocator consistency checks now
 * A script that ends mid-step just ends.
 */
#ifndef VAD_FUZZ_SESSION_SCRIPT_H
#define VAD_FUZZ_SESSION_SCRIPT_H

#define FS_SESSIONS 3

enum fs_action {
	FS_FEED = 0,
	FS_FEED_BIG = 1,
	FS_DRAIN = 2,
	FS_DRAIN_SOME = 3,
	FS_ATTACH = 4,
	FS_REOPEN = 5,
	FS_PURGE = 6,
	FS_CHECK = 7,
};

/* The control byte for an action on a session with an argument. */
#define FS_CTL(session, action, arg)                                                               \
	((unsigned char)(((session)&3) | (((action)&7) << 2) | (((arg)&7) << 5)))

/* Peers a session can be opened as (the arg of FS_REOPEN, modulo FS_PEERS). Peer 0 is
 * root (admin), 1 an ordinary uid, 2 the only uid the "private" arena allows, 3 a member
 * of the admin group. */
#define FS_PEERS       4
#define FS_UID_PLAIN   1000
#define FS_UID_PRIVATE 12345
#define FS_GID_ADMIN   4242

#endif
