/* ranges.c - a range's life in the daemon: alloc and release as mirror calls; see ranges.h. */
#include "ranges.h"

#include <inttypes.h>

#include "commit.h"
#include "latency.h"
#include "log.h"
#include "session.h"

/* All or nothing: give back to the allocator what this batch got when recording it failed. */
static void give_back(struct vad_session *s, const struct vad_arena *a, size_t n,
		      const uint64_t *offsets)
{
	size_t freed = 0;
	int rc = va_free_batch(a->vs, n, offsets, NULL, &freed);
	if (rc < 0)
		vad_session_log(s, VAD_LOG_ERR,
				"session %llu: giving back range 0x%" PRIx64
				" of an alloc batch in '%s' failed: %s",
				(unsigned long long)s->id, offsets[freed], a->conf.name,
				va_strerror(rc));
}

/* The allocator's batch call and the holds; 0, or -1 with *why (the quota is the caller's). */
static int allocate_and_hold(struct vad_session *s, unsigned ai, size_t n, const uint64_t *sizes,
			     uint64_t align, uint64_t *offsets, struct vad_range **ranges,
			     struct vad_alloc_refusal *why)
{
	struct vad_arena *a = s->svc->arenas[ai];
	/* One call for the batch: the allocator takes each node lock once per run of areas. */
	int rc =
	    va_alloc_batch(a->vs, n, sizes, align, (void *const *)ranges, offsets, &why->failed);
	if (rc < 0) {
		why->rc = rc;
		return -1;
	}
	if (a->conf.commit == VAD_COMMIT_RESERVE &&
	    vad_commit_ranges(a, n, offsets, sizes, &why->failed, &why->commit_errno) != 0) {
		give_back(s, a, n, offsets); /* already punched: the lazy release finds holes */
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		ranges[i]->offset = offsets[i];
		ranges[i]->size = sizes[i];
	}
	int irc = vad_registry_insert(s->svc->reg, &s->holder, ai, ranges, n);
	if (irc == 0)
		return 0;
	give_back(s, a, n, offsets);
	if (irc == -2) {
		why->quota = VAD_QUOTA_COUNTER;
		why->held = __atomic_load_n(&s->svc->reg->arenas[ai].ref_bytes, __ATOMIC_RELAXED);
	} else {
		why->rc = VA_ENOMEM;
		why->failed = n;
	}
	return -1;
}

int vad_ranges_alloc(struct vad_session *s, unsigned ai, size_t n, const uint64_t *sizes,
		     uint64_t align, uint64_t total, uint64_t *offsets,
		     struct vad_alloc_refusal *why)
{
	*why = (struct vad_alloc_refusal){.quota = VAD_QUOTA_OK, .failed = n};
	struct vad_range **ranges = n <= SIZE_MAX / sizeof(*ranges)
					? vad_scratch_alloc(&s->scratch, n * sizeof(*ranges))
					: NULL;
	if (!ranges) {
		why->rc = VA_ENOMEM;
		return -1;
	}
	struct vad_limits l = vad_service_limits(s->svc);
	struct vad_quota quota = vad_limits_quota(&l);
	why->quota = vad_registry_reserve(&s->holder, total, n, &quota, &why->held);
	if (why->quota != VAD_QUOTA_OK)
		return -1;
	uint64_t t0 = vad_now_ns();
	/* the allocator's owner tags, which the consistency check compares against */
	if (!vad_range_get_batch(ranges, n)) {
		why->rc = VA_ENOMEM;
		vad_registry_unreserve(&s->holder, total, n);
		return -1;
	}
	if (allocate_and_hold(s, ai, n, sizes, align, offsets, ranges, why) < 0) {
		vad_range_put_batch(ranges, n);
		vad_registry_unreserve(&s->holder, total, n);
		return -1;
	}
	vad_latency_record(s->svc->arenas[ai]->alloc_latency, vad_now_ns() - t0);
	__atomic_add_fetch(&s->allocs, n, __ATOMIC_RELAXED);
	return 0;
}

int vad_ranges_quota_check(struct vad_session *s, uint64_t total, size_t n,
			   struct vad_alloc_refusal *why)
{
	*why = (struct vad_alloc_refusal){.quota = VAD_QUOTA_OK, .failed = n};
	struct vad_limits l = vad_service_limits(s->svc);
	struct vad_quota quota = vad_limits_quota(&l);
	why->quota = vad_registry_reserve(&s->holder, total, n, &quota, &why->held);
	if (why->quota != VAD_QUOTA_OK)
		return -1;
	vad_registry_unreserve(&s->holder, total, n);
	return 0;
}

size_t vad_ranges_release(struct vad_session *s, unsigned ai, const uint64_t *offsets, size_t n)
{
	size_t done = vad_registry_release_batch(s->svc->reg, &s->holder, ai, offsets, n);
	__atomic_add_fetch(&s->frees, done, __ATOMIC_RELAXED);
	return done;
}
