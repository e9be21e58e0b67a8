/* dispatch.c - a decoded request to its handler, from the operations table (ops.h). */
#include "handler.h"

#include "frame.h"
#include "handler_internal.h"
#include "ops.h"

const char *vad_op_name(Vad__Request__OpCase op)
{
	switch (op) {
#define OP_NAME(op, name, call)                                                                    \
	case VAD__REQUEST__OP_##op:                                                                \
		return name;
		VAD_OPS(OP_NAME)
#undef OP_NAME
	default:
		return "an unknown operation";
	}
}

void vad_handle_request(struct vad_session *s, const Vad__Request *req, struct vad_reply *r)
{
	r->resp.id = req->id;
	switch (req->op_case) {
#define OP_DISPATCH(op, name, call)                                                                \
	case VAD__REQUEST__OP_##op:                                                                \
		call;                                                                              \
		break;
		VAD_OPS(OP_DISPATCH)
#undef OP_DISPATCH
	default:
		vad_reply_error(r, VAD__ERROR__EUNSUPPORTED,
				"this daemon does not know that operation (it speaks vad protocol "
				"%d); upgrade the daemon or use an older client",
				VAD_PROTOCOL_VERSION);
		break;
	}
}
