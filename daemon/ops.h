/*
 * ops.h - the protocol's operations, one row each: the request's oneof case, the name
 * messages use, and the handler call (in handler.c or handler_admin.c). The dispatch and
 * vad_op_name are both generated from this table, so an operation is added in one place.
 */
#ifndef VAD_OPS_H
#define VAD_OPS_H

/* X(CASE, "name", call): CASE is VAD__REQUEST__OP_<CASE>; call is evaluated with the session
 * s, the request req and the reply r in scope. */
#define VAD_OPS(X)                                                                                 \
	X(HELLO, "hello", handle_hello(s, req->hello, r))                                          \
	X(ALLOC, "alloc", handle_alloc(s, req->alloc, r))                                          \
	X(FREE, "free", handle_free(s, req->free, r))                                              \
	X(MAP_ARENA, "map-arena", handle_map_arena(s, req->map_arena, r))                          \
	X(SHARE, "share", handle_share(s, req->share, r))                                          \
	X(ATTACH, "attach", handle_attach(s, req->attach, r))                                      \
	X(STATS, "stats", handle_stats(s, req->stats, r))                                          \
	X(ARENAS, "arenas", handle_arenas(s, r))                                                   \
	X(CLIENTS, "clients", handle_clients(s, r))                                                \
	X(PURGE, "purge", handle_purge(s, req->purge, r))                                          \
	X(RELOAD, "reload", handle_reload(s, r))                                                   \
	X(CHECK, "check", handle_check(s, r))                                                      \
	X(WALK, "walk", handle_walk(s, req->walk, r))                                              \
	X(UNSHARE, "unshare", handle_unshare(s, req->unshare, r))                                  \
	X(METRICS, "metrics", handle_metrics(s, r))                                                \
	X(RANGES, "ranges", handle_ranges(s, req->ranges, r))                                      \
	X(TOKENS, "tokens", handle_tokens(s, req->tokens, r))                                      \
	X(KILL, "kill", handle_kill(s, req->kill, r))                                              \
	X(CONFIG, "config", handle_config(s, r))                                                   \
	X(RESTART, "restart", handle_restart(s, r))                                                \
	X(RESUME, "resume", handle_resume(s, req->resume, r))

#endif
