/* session_arena.c - which arena a session means by a name, and the tenant arenas it pins;
 * see session.h and tenants.h. */
#include "session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t vad_session_tenant(const struct vad_session *s, unsigned sec)
{
	return vad_section_tenancy(s->svc->tenants, sec) == VAD_TENANCY_GID ? (uint32_t)s->peer.gid
									    : (uint32_t)s->peer.uid;
}

/* Split "NAME@ID" into the section and the id; false when name has no '@' or a bad id. */
static bool split_tenant_name(const struct vad_service *svc, const char *name, unsigned *sec,
			      uint32_t *id, bool *has_at)
{
	const char *at = strchr(name, '@');
	*has_at = at != NULL;
	if (!at || (size_t)(at - name) > VAD_NAME_MAX || at[1] < '0' || at[1] > '9')
		return false;
	char section[VAD_NAME_MAX + 1];
	memcpy(section, name, (size_t)(at - name));
	section[at - name] = '\0';
	char *end;
	errno = 0;
	unsigned long v = strtoul(at + 1, &end, 10);
	if (errno || *end || v > UINT32_MAX || !section[0] ||
	    vad_section_find(svc->tenants, section, sec) != 0 ||
	    vad_section_tenancy(svc->tenants, *sec) == VAD_TENANCY_NONE)
		return false;
	*id = (uint32_t)v;
	return true;
}

/* The session's tenant arena of section sec: its pin, or a new one (opened if open). */
static enum vad_lookup tenant_arena(struct vad_session *s, unsigned sec, bool open, unsigned *index,
				    char *why, size_t why_len)
{
	if (s->tenant_slot[sec]) {
		*index = s->tenant_slot[sec] - 1;
		return VAD_LOOKUP_OK;
	}
	unsigned slot;
	switch (vad_tenant_pin(s->svc->tenants, sec, vad_session_tenant(s, sec), open, &slot, why,
			       why_len)) {
	case VAD_TENANT_OK:
		break;
	case VAD_TENANT_NOT_OPEN:
		return VAD_LOOKUP_NOT_OPEN;
	case VAD_TENANT_LIMIT:
		return VAD_LOOKUP_LIMIT;
	case VAD_TENANT_FAILED:
	default:
		return VAD_LOOKUP_FAILED;
	}
	s->tenant_slot[sec] = slot + 1;
	s->allowed[slot] = true;
	*index = slot;
	return VAD_LOOKUP_OK;
}

/* vad_session_arena without the memory of the last name. */
static enum vad_lookup lookup(struct vad_session *s, const char *name, bool open,
			      struct vad_arena **a, unsigned *index, char *why, size_t why_len)
{
	struct vad_service *svc = s->svc;
	unsigned sec;
	uint32_t id = 0;
	bool has_at = false;
	bool named_tenant = name && split_tenant_name(svc, name, &sec, &id, &has_at);
	if (!named_tenant && (has_at || vad_section_find(svc->tenants, name, &sec) != 0))
		return VAD_LOOKUP_UNKNOWN;
	const struct vad_arena_conf *conf = vad_section_conf(svc->tenants, sec);
	if (!s->allowed[sec] && !open && conf->tenancy != VAD_TENANCY_NONE)
		return VAD_LOOKUP_NOT_OPEN; /* about held ranges: it never had a tenant arena */
	if (!s->allowed[sec] && open) {
		snprintf(why, why_len,
			 "arena '%s' does not allow uid %u (gid %u); its allow_uids/allow_gids "
			 "in vad.conf decide who may use it",
			 conf->name, (unsigned)s->peer.uid, (unsigned)s->peer.gid);
		return VAD_LOOKUP_DENIED;
	}
	if (conf->tenancy == VAD_TENANCY_NONE) {
		*index = sec;
		*a = svc->arenas[sec];
		return VAD_LOOKUP_OK;
	}
	if (named_tenant && id != vad_session_tenant(s, sec)) {
		snprintf(why, why_len,
			 "arena '%s' is the arena of another tenant of '%s' (tenancy = %s); "
			 "name '%s' to use your own",
			 name, conf->name, conf->tenancy == VAD_TENANCY_UID ? "uid" : "gid",
			 conf->name);
		return VAD_LOOKUP_DENIED;
	}
	enum vad_lookup st = tenant_arena(s, sec, open, index, why, why_len);
	if (st == VAD_LOOKUP_OK)
		*a = svc->arenas[*index];
	return st;
}

enum vad_lookup vad_session_arena(struct vad_session *s, const char *name, bool open,
				  struct vad_arena **a, unsigned *index, char *why, size_t why_len)
{
	if (!name)
		name = "";
	if (s->last_arena_set && strcmp(name, s->last_arena) == 0) {
		*index = s->last_arena_index; /* plain or pinned: it stays until the session ends */
		*a = s->svc->arenas[*index];
		return VAD_LOOKUP_OK;
	}
	enum vad_lookup st = lookup(s, name, open, a, index, why, why_len);
	size_t len = strlen(name);
	if (st == VAD_LOOKUP_OK && s->allowed[*index] && len < sizeof(s->last_arena)) {
		memcpy(s->last_arena, name, len + 1);
		s->last_arena_index = *index;
		s->last_arena_set = true;
	}
	return st;
}

void vad_session_pin_tenants(struct vad_session *s)
{
	for (unsigned sec = 0; sec < s->svc->n_arenas; sec++) {
		unsigned index;
		char why[8];
		if (!s->tenant_slot[sec] && s->allowed[sec] &&
		    vad_section_tenancy(s->svc->tenants, sec) != VAD_TENANCY_NONE)
			tenant_arena(s, sec, false, &index, why, sizeof(why));
	}
}
