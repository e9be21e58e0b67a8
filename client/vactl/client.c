/* client.c - connecting to the daemon and turning libvad failures into exit codes. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "vactl.h"

static const struct {
	const char *name, *label;
} codes[] = {
    {"OK", "ok"},
    {"EINVAL", "invalid argument"},
    {"ENOMEM", "out of memory"},
    {"ECONNECT", "cannot connect"},
    {"EGONE", "connection lost"},
    {"EPROTO", "protocol error"},
    {"EVERSION", "protocol version mismatch"},
    {"ENOSPC", "no space"},
    {"EQUOTA", "quota exceeded"},
    {"EPERM", "permission denied"},
    {"ENOARENA", "no such arena"},
    {"ENOTHELD", "not held"},
    {"ETOKEN", "bad token"},
    {"ESIZE", "bad size"},
    {"EALIGN", "bad alignment"},
    {"ETOOBIG", "request too big"},
    {"EBUSY", "daemon busy"},
    {"EINTERNAL", "daemon internal error"},
    {"EMAP", "cannot map arena"},
    {"EUNSUPPORTED", "unsupported"},
    {"ENOHELLO", "no hello"},
};

static int code_index(int err)
{
	int i = -err;
	return i >= 0 && i < (int)(sizeof(codes) / sizeof(codes[0])) ? i : -1;
}

const char *vactl_err_label(int err)
{
	int i = code_index(err);
	return i < 0 ? "error" : codes[i].label;
}

const char *vactl_err_name(int err)
{
	int i = code_index(err);
	return i < 0 ? "EUNKNOWN" : codes[i].name;
}

int vactl_exit_code(int err)
{
	if (err == VAD_OK)
		return VACTL_EXIT_OK;
	if (err == VAD_ECONNECT || err == VAD_EGONE)
		return VACTL_EXIT_UNREACHABLE;
	return VACTL_EXIT_REFUSED;
}

static void report_text(const struct vactl_opts *o, int err, const char *sentence)
{
	if (o->json) {
		json_object *j = json_object_new_object();
		vactl_json_add_str(j, "error", vactl_err_name(err));
		json_object_object_add(j, "code", json_object_new_int(err));
		vactl_json_add_str(j, "message", sentence);
		vactl_json_print(j);
	}
}

int vactl_report(const struct vactl_opts *o, vad_client *c, int err)
{
	const char *sentence = c ? vad_last_error(c) : vad_strerror(err);
	const char *label = vactl_err_label(err);
	/* The daemon's sentence often starts with the label already ("quota exceeded: ..."). */
	if (strncasecmp(sentence, label, strlen(label)) == 0)
		fprintf(stderr, "vactl: %s\n", sentence);
	else
		fprintf(stderr, "vactl: %s: %s\n", label, sentence);
	report_text(o, err, sentence);
	return vactl_exit_code(err);
}

int vactl_connect(const struct vactl_opts *o, vad_client **out)
{
	int err = vad_connect(o->socket, "vactl", out);
	if (err == VAD_OK)
		return VACTL_EXIT_OK;
	const char *sentence = vad_last_error(NULL);
	if (err == VAD_ECONNECT)
		fprintf(stderr,
			"vactl: %s (is vad running? try 'make run' or 'systemctl start vad')\n",
			sentence);
	else
		fprintf(stderr, "vactl: %s: %s\n", vactl_err_label(err), sentence);
	report_text(o, err, sentence);
	return vactl_exit_code(err);
}
