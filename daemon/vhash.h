/*
 * vhash.h - uthash configured for the daemon: running out of memory is an error the caller
 * sees, never an exit() (after an add, vad_hash_oom is true if the element was not added),
 * and keys are hashed a word at a time with a multiply-xorshift mix instead of Jenkins'
 * byte loop. Every key here is chosen by the daemon (offsets, uids, random tokens) or only
 * looked up, so a fast unkeyed hash cannot be flooded. Include this instead of <uthash.h>;
 * use only the default handle name `hh`.
 */
#ifndef VAD_VHASH_H
#define VAD_VHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Set by uthash when an add could not allocate its table; reset it before each add. */
extern __thread bool vad_hash_oom;

/* Hash of len bytes at key; the low bits (uthash's bucket index) are well mixed. */
static inline unsigned vad_hash_bytes(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t w = 0;
		memcpy(&w, p, len);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (unsigned)h;
}

/* Hash of an (arena, offset) key for the holders' tables: offsets are quantum multiples
 * (low bits zero), so every input bit is mixed into the low bits the table index uses. */
static inline uint64_t vad_hash_pair(uint64_t arena, uint64_t offset)
{
	uint64_t h = offset ^ (arena * 0x9e3779b97f4a7c15ull);
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 29;
	return h;
}

#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = vad_hash_bytes((keyptr), (size_t)(keylen)))
#define HASH_NONFATAL_OOM		     1
#define uthash_nonfatal_oom(obj)	     (vad_hash_oom = true)
#include <uthash.h>

#endif
