/* client.c - connecting to the daemon and turning libvad failures into exit codes. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include "term.h"
#include "vactl.h"

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
		vactl_json_add_error(j, err, sentence);
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

int vactl_report_close(const struct vactl_opts *o, vad_client *c, int err)
{
	int rc = vactl_report(o, c, err);
	vad_close(c);
	return rc;
}

static char timeout_text[256], timeout_json[320];
static size_t timeout_text_len, timeout_json_len;

static void on_deadline(int sig)
{
	(void)sig;
	/* Only async-signal-safe calls: the texts were formatted when the deadline was set. */
	vactl_term_leave(); /* a live view's terminal back first */
	if (timeout_json_len)
		(void)!write(STDOUT_FILENO, timeout_json, timeout_json_len);
	(void)!write(STDERR_FILENO, timeout_text, timeout_text_len);
	_exit(VACTL_EXIT_UNREACHABLE);
}

void vactl_deadline(const struct vactl_opts *o, bool on)
{
	if (!o->timeout_ms)
		return;
	if (on && !timeout_text_len) {
		char secs[32];
		vactl_fmt_duration(o->timeout_ms, secs, sizeof(secs));
		snprintf(timeout_text, sizeof(timeout_text),
			 "vactl: no answer from the daemon within %s (is it stuck? --timeout "
			 "changes the limit)\n",
			 secs);
		timeout_text_len = strlen(timeout_text);
		if (o->json) {
			snprintf(timeout_json, sizeof(timeout_json),
				 "{\"error\": \"ETIMEOUT\", \"message\": \"no answer from the "
				 "daemon within %s\"}\n",
				 secs);
			timeout_json_len = strlen(timeout_json);
		}
		struct sigaction sa = {.sa_handler = on_deadline};
		sigemptyset(&sa.sa_mask);
		sigaction(SIGALRM, &sa, NULL);
	}
	struct itimerval it = {{0, 0}, {0, 0}};
	if (on) {
		it.it_value.tv_sec = (time_t)(o->timeout_ms / 1000);
		it.it_value.tv_usec = (suseconds_t)(o->timeout_ms % 1000) * 1000;
	}
	setitimer(ITIMER_REAL, &it, NULL);
}

int vactl_connect(const struct vactl_opts *o, vad_client **out)
{
	vactl_deadline(o, true);
	int err = vad_connect(o->socket, "vactl", out);
	if (err == VAD_OK)
		return VACTL_EXIT_OK;
	const char *sentence = vad_last_error(NULL);
	if (err == VAD_ECONNECT) /* libvad's sentence names the path and the hint that fits */
		fprintf(stderr, "vactl: %s\n", sentence);
	else
		fprintf(stderr, "vactl: %s: %s\n", vactl_err_label(err), sentence);
	report_text(o, err, sentence);
	return vactl_exit_code(err);
}

bool vactl_begin(const struct vactl_cmd *cmd, struct vactl_opts *o, int argc, char **argv,
		 int max_args, int *first, vad_client **c, int *exit_code)
{
	int rc = vactl_parse_cmd(cmd, o, argc, argv, NULL, NULL, NULL, NULL, first);
	if (rc == VACTL_EXIT_OK)
		rc = vactl_check_operands(cmd, argc, argv, *first, max_args);
	if (rc == VACTL_EXIT_OK)
		rc = vactl_connect(o, c);
	*exit_code = rc < 0 ? VACTL_EXIT_OK : rc;
	return rc == VACTL_EXIT_OK;
}
