/*
 * reader.h - the reader role (reader.c): one waiting thread receives for everyone. Used by
 * transport.c while a call waits for its reply.
 */
#ifndef LIBVAD_READER_H
#define LIBVAD_READER_H

#include <stdbool.h>

#include "internal.h"

/* With c->lock held and nobody reading: be the reader for one receive, deliver every
 * whole reply it completes and wake their waiters, then give up the role (to a sleeping
 * waiter, woken, if me is answered). A broken stream fails every waiter. Returns true,
 * without c->lock, if me is answered (me NULL: always); false with c->lock held otherwise.
 * With nowait the receive takes only what is in the socket already (vad_progress). */
bool libvad_read_round(vad_client *c, struct libvad_pending *me, bool nowait);

/* Free the reader's buffer and close the fds nobody claimed. */
void libvad_reader_destroy(vad_client *c);

#endif
