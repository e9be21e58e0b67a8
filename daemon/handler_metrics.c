/* handler_metrics.c - the metrics operation (`vactl metrics`): the text /metrics serves,
 * showing the arenas this session's stats would show. See handler.h and metrics.h. */
#include "handler.h"

#include <stdlib.h>
#include <string.h>

#include "handler_internal.h"
#include "metrics.h"
#include "session.h"
#include "units.h"

static bool session_visible(void *ctx, const struct vad_arena *a)
{
	return stats_visible(ctx, a);
}

/* Room a Response with a MetricsReply needs besides the text: the id (11 bytes at most), the
 * result's tag and length (2 + 5) and the text's (1 + 5) make 24; rounded up. */
#define METRICS_REPLY_OVERHEAD 32

void handle_metrics(struct vad_session *s, struct vad_reply *r)
{
	vad_session_pin_tenants(s);
	size_t len;
	char *text = vad_metrics_render(s->svc, session_visible, s, &len);
	if (!text) {
		out_of_memory(r, "building the metrics text");
		return;
	}
	uint32_t max = vad_service_max_frame(s->svc);
	if (len + METRICS_REPLY_OVERHEAD > max) {
		char a[32], b[32];
		vad_reply_error(
		    r, VAD__ERROR__ETOOBIG,
		    "the metrics text (%s) does not fit max_frame (%s); raise max_frame "
		    "in vad.conf or scrape the metrics_listen address over HTTP",
		    vad_format_size(len, a, sizeof(a)), vad_format_size(max, b, sizeof(b)));
		free(text);
		return;
	}
	char *copy = scratch_array(s, len + 1, 1); /* lives until the reply is sent */
	if (!copy) {
		free(text);
		out_of_memory(r, "building the metrics text");
		return;
	}
	memcpy(copy, text, len + 1);
	free(text);
	vad__metrics_reply__init(&r->u.metrics);
	r->u.metrics.text = copy;
	r->resp.result_case = VAD__RESPONSE__RESULT_METRICS;
	r->resp.metrics = &r->u.metrics;
}
