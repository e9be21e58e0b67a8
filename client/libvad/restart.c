/* restart.c - the admin restart in place (vad_restart). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "transport.h"

int vad_restart(vad_client *c, char **detail)
{
	Vad__Restart rs = VAD__RESTART__INIT;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_RESTART;
	req.restart = &rs;
	Vad__Response *r;
	if (!c)
		return libvad_fail(c, VAD_EINVAL, "the client is NULL");
	int err = libvad_rpc(c, &req, VAD__RESPONSE__RESULT_RESTART, &r, NULL);
	if (err != VAD_OK)
		return err;
	if (detail) {
		*detail = strdup(r->restart->detail);
		if (!*detail)
			err = libvad_fail(c, VAD_ENOMEM, NULL);
	}
	vad__response__free_unpacked(r, NULL);
	return err;
}
