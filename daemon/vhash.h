/*
 * vhash.h - uthash configured so that running out of memory is an error the caller sees,
 * never an exit(): after an add, vad_hash_oom is true if the element was not added.
 * Include this instead of <uthash.h>; use only the default handle name `hh`.
 */
#ifndef VAD_VHASH_H
#define VAD_VHASH_H

#include <stdbool.h>

/* Set by uthash when an add could not allocate its table; reset it before each add. */
extern __thread bool vad_hash_oom;

#define HASH_NONFATAL_OOM	 1
#define uthash_nonfatal_oom(obj) (vad_hash_oom = true)
#include <uthash.h>

#endif
