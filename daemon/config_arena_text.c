/* config_arena_text.c - each [arena] key's value as vactl config shows it, one case per row of
 * ARENA_KEYS (config_parse.h), and the table's names for the other modules. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_parse.h"
#include "units.h"

static const char *const arena_key_names[N_ARENA_KEYS] = {
#define ARENA_KEY_NAME(id, key, fn) [id] = key,
    ARENA_KEYS(ARENA_KEY_NAME)
#undef ARENA_KEY_NAME
};

_Static_assert(N_ARENA_KEYS <= VAD_ARENA_KEYS_MAX, "VAD_ARENA_KEYS_MAX is too small");

size_t vad_config_arena_key_count(void)
{
	return N_ARENA_KEYS;
}

const char *vad_config_arena_key_name(size_t i)
{
	return i < N_ARENA_KEYS ? arena_key_names[i] : NULL;
}

/* "1000, 1001", or "-" for an empty list, into buf. */
static void id_list(const uint32_t *ids, size_t n, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%u", i ? ", " : "", ids[i]);
	if (!n)
		snprintf(buf, len, "-");
}

const char *vad_config_arena_key_text(const struct vad_arena_conf *a, size_t i, char *buf,
				      size_t len)
{
	_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t),
		       "ids are 32-bit");
	if (!buf || !len)
		return buf;
	buf[0] = '\0';
	char sz[32];
	switch ((enum arena_key)i) {
	case A_SIZE:
		return vad_format_size(a->size, buf, len);
	case A_QUANTUM:
		return vad_format_size(a->quantum, buf, len);
	case A_BACKING:
		if (a->hugetlb_page && !a->backing[0])
			snprintf(buf, len, "hugetlb:%s", vad_format_size(a->hugetlb_page, sz, 32));
		else
			snprintf(buf, len, "%s", a->backing[0] ? a->backing : "memfd");
		return buf;
	case A_ALLOW_UIDS:
		id_list((const uint32_t *)a->allow_uids, a->n_allow_uids, buf, len);
		return buf;
	case A_ALLOW_GIDS:
		id_list((const uint32_t *)a->allow_gids, a->n_allow_gids, buf, len);
		return buf;
	case A_READER_UIDS:
		id_list((const uint32_t *)a->reader_uids, a->n_reader_uids, buf, len);
		return buf;
	case A_READER_GIDS:
		id_list((const uint32_t *)a->reader_gids, a->n_reader_gids, buf, len);
		return buf;
	case A_ACCEPT_UNSEALED:
		snprintf(buf, len, "%s", a->accept_unsealed ? "yes" : "no");
		return buf;
	case A_TENANCY:
		snprintf(buf, len, "%s", vad_tenancy_name(a->tenancy));
		return buf;
	case A_TENANT_IDLE:
		snprintf(buf, len, "%llu ms", (unsigned long long)a->tenant_idle_ms);
		return buf;
	case A_MAX_TENANTS:
		snprintf(buf, len, "%u", a->max_tenants);
		return buf;
	case A_HUGE:
		snprintf(buf, len, "%s", a->thp ? "thp" : "none");
		return buf;
	case A_COMMIT:
		snprintf(buf, len, "%s", a->commit == VAD_COMMIT_RESERVE ? "reserve" : "touch");
		return buf;
	case A_NUMA_NODE:
		snprintf(buf, len, "%s", a->numa_text[0] ? a->numa_text : "none");
		return buf;
	case N_ARENA_KEYS:
		break;
	}
	return buf;
}
