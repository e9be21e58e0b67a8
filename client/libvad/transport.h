/*
 * transport.h - requests and their replies (transport.c): what every operation of libvad
 * calls. It uses the reader (reader.h) and the sender (sender.h), never the reverse.
 */
#ifndef LIBVAD_TRANSPORT_H
#define LIBVAD_TRANSPORT_H

#include "internal.h"

/* Send req (its id is set here) and wait for the matching response. On VAD_OK *resp is
 * the decoded response (free with vad__response__free_unpacked(r, NULL)) and, if fd is
 * not NULL, *fd is the descriptor that came with it or -1. Does not look at resp->error. */
int libvad_call(vad_client *c, Vad__Request *req, Vad__Response **resp, int *fd);

/* A fresh request id for c (ids are never reused on a connection). */
uint64_t libvad_next_id(vad_client *c);

/* Send the encoded frame of request id (from libvad_next_id) and wait for its response,
 * as libvad_call. With fast set, an Alloc or Free reply is decoded into it (no heap):
 * free *resp with libvad_reply_free either way. */
int libvad_call_frame(vad_client *c, uint64_t id, const uint8_t *frame, size_t flen,
		      struct libvad_fast_reply *fast, Vad__Response **resp, int *fd);

/* libvad_call_frame, then the checks of libvad_rpc. */
int libvad_rpc_frame(vad_client *c, uint64_t id, const uint8_t *frame, size_t flen,
		     struct libvad_fast_reply *fast, Vad__Response__ResultCase expect,
		     Vad__Response **resp);

/* Wait for p's response (in the table already), reading for everyone when nobody else
 * does. Called with c->lock held; returns without it. */
void libvad_wait_reply(vad_client *c, struct libvad_pending *p);

/* Free a response from libvad_call_frame (it may live in fast). */
void libvad_reply_free(Vad__Response *r, const struct libvad_fast_reply *fast);

/* libvad_call, then turn a daemon error into its VAD_E* code (recording the daemon's
 * sentence) and check that the result has the expected case. On VAD_OK the caller owns
 * *resp. Every failure is recorded for vad_last_error. */
int libvad_rpc(vad_client *c, Vad__Request *req, Vad__Response__ResultCase expect,
	       Vad__Response **resp, int *fd);

/* The daemon's parting sentence (an unasked error reply before it closed), or NULL.
 * Valid until vad_close. */
const char *libvad_dead_message(vad_client *c);

/* Record err, the failure of a call that got no reply (its connection dropped, or the
 * reconnect failed), and return it: VAD_ERESUME keeps the sentence its reconnect recorded
 * on this thread (the daemon came back without the session), any other error gets the
 * daemon's parting sentence, if it sent one. */
int libvad_fail_unanswered(vad_client *c, int err);

/* The VAD_E* code of a decoded response: the daemon's error (its sentence recorded for
 * vad_last_error), VAD_EPROTO if the result is not of the expected case, else VAD_OK.
 * Does not free r. */
int libvad_response_error(vad_client *c, const Vad__Response *r, Vad__Response__ResultCase expect);

/* Free the transport state (buffers, queued fds, the parting sentence). */
void libvad_transport_destroy(vad_client *c);

#endif
