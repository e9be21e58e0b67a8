/* daemon.c - start, watch and stop a real vad on a temporary socket. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "harness.h"

#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS	 10000

/* The [vad] defaults every test config starts from; vad_extra may override any. */
static const char *const default_keys[][2] = {
    {"socket", NULL}, /* filled from the vt_daemon */
    {"socket_mode", "0666"},  {"workers", "2"},	     {"stats_db", NULL},
    {"stats_interval", "2s"}, {"log_level", "info"},
};

int vt_daemon_init(struct vt_daemon *d)
{
	memset(d, 0, sizeof(*d));
	if (vt_make_temp_dir(d->dir, sizeof(d->dir), "itest-vad") != 0)
		return -1;
	/* Children that drop to nobody must reach the socket inside. */
	if (chmod(d->dir, 0755) != 0) {
		fprintf(stderr, "harness: chmod %s: %s\n", d->dir, strerror(errno));
		return -1;
	}
	snprintf(d->conf_path, sizeof(d->conf_path), "%s/vad.conf", d->dir);
	snprintf(d->socket_path, sizeof(d->socket_path), "%s/vad.sock", d->dir);
	snprintf(d->log_path, sizeof(d->log_path), "%s/vad.log", d->dir);
	snprintf(d->stats_db, sizeof(d->stats_db), "%s/stats.db", d->dir);
	snprintf(d->vad_bin, sizeof(d->vad_bin), "%s/vad", vt_build_dir());
	return 0;
}

/* Does vad_extra set key (a line "key =" or "key=" at its start)? */
static bool extra_sets(const char *extra, const char *key)
{
	size_t klen = strlen(key);
	for (const char *line = extra; line && *line;) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (strncmp(line, key, klen) == 0) {
			const char *p = line + klen;
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p == '=')
				return true;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return false;
}

int vt_daemon_write_config(struct vt_daemon *d, const char *vad_extra, const char *arena_sections)
{
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.new", d->conf_path);
	FILE *f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "harness: cannot write %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	fprintf(f, "# written by the vad integration test harness\n[vad]\n");
	for (size_t i = 0; i < sizeof(default_keys) / sizeof(default_keys[0]); i++) {
		const char *key = default_keys[i][0];
		const char *val = default_keys[i][1];
		if (extra_sets(vad_extra, key))
			continue;
		if (strcmp(key, "socket") == 0)
			val = d->socket_path;
		else if (strcmp(key, "stats_db") == 0)
			val = d->stats_db;
		fprintf(f, "%s = %s\n", key, val);
	}
	if (vad_extra) {
		fputs(vad_extra, f);
		if (*vad_extra && vad_extra[strlen(vad_extra) - 1] != '\n')
			fputc('\n', f);
	}
	fputc('\n', f);
	fputs(arena_sections ? arena_sections : "[arena default]\nsize = 256M\n", f);
	if (fclose(f) != 0) {
		fprintf(stderr, "harness: writing %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	/* Atomic replace so a SIGHUP never sees half a file. */
	if (rename(tmp, d->conf_path) != 0) {
		fprintf(stderr, "harness: rename %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	return 0;
}

static bool socket_accepts(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t plen = strlen(path);
	if (plen >= sizeof(sa.sun_path)) {
		fprintf(stderr, "harness: socket path too long: %s\n", path);
		close(fd);
		return false;
	}
	memcpy(sa.sun_path, path, plen + 1);
	bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

int vt_daemon_log_count(const struct vt_daemon *d, const char *needle)
{
	FILE *f = fopen(d->log_path, "r");
	if (!f)
		return -1;
	char line[2048];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

void vt_daemon_print_log(const struct vt_daemon *d, int max_lines)
{
	FILE *f = fopen(d->log_path, "r");
	if (!f) {
		fprintf(stderr, "harness: no daemon log at %s\n", d->log_path);
		return;
	}
	/* Two passes: count lines, then print the tail. */
	int lines = 0, c;
	while ((c = fgetc(f)) != EOF)
		if (c == '\n')
			lines++;
	rewind(f);
	int skip = lines > max_lines ? lines - max_lines : 0;
	fprintf(stderr, "---- daemon log %s (last %d of %d lines) ----\n", d->log_path,
		lines - skip, lines);
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		if (n++ >= skip)
			fputs(line, stderr);
	fprintf(stderr, "---- end of daemon log ----\n");
	fclose(f);
}

bool vt_daemon_log_contains(const struct vt_daemon *d, const char *needle)
{
	FILE *f = fopen(d->log_path, "r");
	if (!f)
		return false;
	char line[8192];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

int vt_daemon_start(struct vt_daemon *d)
{
	return vt_daemon_start_opts(d, NULL);
}

int vt_daemon_start_opts(struct vt_daemon *d, const struct vt_start_opts *opts)
{
	if (access(d->vad_bin, X_OK) != 0) {
		fprintf(stderr, "harness: no daemon binary %s: %s\n", d->vad_bin, strerror(errno));
		return -1;
	}
	int logfd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0) {
		fprintf(stderr, "harness: open %s: %s\n", d->log_path, strerror(errno));
		return -1;
	}
	const char *bin = opts && opts->as_nobody ? vt_nobody_path(d->vad_bin) : d->vad_bin;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "harness: fork: %s\n", strerror(errno));
		close(logfd);
		return -1;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, STDIN_FILENO);
		dup2(logfd, STDOUT_FILENO);
		dup2(logfd, STDERR_FILENO);
		/* A test run under systemd must not make the daemon talk to it. */
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		unsetenv("LISTEN_FDNAMES");
		unsetenv("WATCHDOG_USEC");
		unsetenv("VAD_SOCKET");
		for (int i = 0; opts && opts->env && opts->env[i]; i++)
			putenv((char *)opts->env[i]);
		if (opts && opts->listen_fd >= 0) {
			/* systemd's protocol: fds from 3, LISTEN_PID names the receiver */
			if (opts->listen_fd != 3) {
				dup2(opts->listen_fd, 3);
				close(opts->listen_fd);
			}
			fcntl(3, F_SETFD, 0);
			char pid_text[32];
			snprintf(pid_text, sizeof(pid_text), "%d", (int)getpid());
			setenv("LISTEN_FDS", "1", 1);
			setenv("LISTEN_PID", pid_text, 1);
		}
		if (opts && opts->nofile) {
			struct rlimit rl = {.rlim_cur = opts->nofile, .rlim_max = opts->nofile};
			if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
				_exit(126);
		}
		if (opts && opts->as_nobody && vt_become_nobody() != 0)
			_exit(126);
		execl(bin, "vad", "-c", d->conf_path, "--foreground", (char *)NULL);
		dprintf(STDERR_FILENO, "harness: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	close(logfd);
	d->pid = pid;
	int timeout = vt_timeout_ms(START_TIMEOUT_MS);
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout * 1000000u;
	while (vt_now_ns() < deadline) {
		int status;
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid) {
			d->pid = 0;
			d->exit_status = status;
			fprintf(stderr, "harness: vad exited during startup (status %s %d)\n",
				WIFEXITED(status) ? "exit" : "signal",
				WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			vt_daemon_print_log(d, 60);
			return -1;
		}
		if (socket_accepts(d->socket_path))
			return 0;
		vt_sleep_ms(10);
	}
	fprintf(stderr, "harness: vad did not accept on %s within %d ms\n", d->socket_path,
		timeout);
	vt_daemon_print_log(d, 60);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	d->pid = 0;
	return -1;
}

int vt_daemon_setup(struct vt_daemon *d, const char *vad_extra, const char *arena_sections)
{
	if (vt_daemon_init(d) != 0)
		return -1;
	if (vt_daemon_write_config(d, vad_extra, arena_sections) != 0)
		return -1;
	return vt_daemon_start(d);
}

int vt_daemon_signal(struct vt_daemon *d, int sig)
{
	if (d->pid <= 0) {
		fprintf(stderr, "harness: daemon not running, cannot send signal %d\n", sig);
		return -1;
	}
	if (kill(d->pid, sig) != 0) {
		fprintf(stderr, "harness: kill(%d, %d): %s\n", (int)d->pid, sig, strerror(errno));
		return -1;
	}
	return 0;
}

bool vt_daemon_alive(struct vt_daemon *d)
{
	if (d->pid <= 0)
		return false;
	int status;
	pid_t w = waitpid(d->pid, &status, WNOHANG);
	if (w == d->pid) {
		d->pid = 0;
		d->exit_status = status;
		return false;
	}
	return w == 0;
}

/* Sanitizer reports in the log are failures even when the exit status hides them. */
static int check_log_clean(const struct vt_daemon *d)
{
	static const char *const reports[] = {
	    "ERROR: AddressSanitizer",	 "runtime error:",
	    "ERROR: LeakSanitizer",	 "WARNING: ThreadSanitizer",
	    "ThreadSanitizer: reported",
	};
	int bad = 0;
	for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++) {
		if (vt_daemon_log_contains(d, reports[i])) {
			fprintf(stderr,
				"harness: daemon log contains a sanitizer report (\"%s\")\n",
				reports[i]);
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

int vt_daemon_stop(struct vt_daemon *d)
{
	if (d->pid <= 0) {
		fprintf(stderr, "harness: daemon is not running (it died earlier?)\n");
		vt_daemon_print_log(d, 60);
		return -1;
	}
	pid_t pid = d->pid;
	if (kill(pid, SIGTERM) != 0) {
		fprintf(stderr, "harness: SIGTERM to vad: %s\n", strerror(errno));
		return -1;
	}
	int timeout = vt_timeout_ms(STOP_TIMEOUT_MS);
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout * 1000000u;
	int status = 0;
	pid_t w = 0;
	while ((w = waitpid(pid, &status, WNOHANG)) == 0 && vt_now_ns() < deadline)
		vt_sleep_ms(10);
	if (w != pid) {
		fprintf(stderr, "harness: vad did not exit within %d ms of SIGTERM; killing it\n",
			timeout);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		d->pid = 0;
		vt_daemon_print_log(d, 60);
		return -1;
	}
	d->pid = 0;
	d->exit_status = status;
	int rc = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFEXITED(status))
			fprintf(stderr, "harness: vad exited with status %d after SIGTERM\n",
				WEXITSTATUS(status));
		else
			fprintf(stderr, "harness: vad died of signal %d after SIGTERM\n",
				WTERMSIG(status));
		rc = -1;
	}
	if (check_log_clean(d) != 0)
		rc = -1;
	if (rc != 0)
		vt_daemon_print_log(d, 80);
	return rc;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

void vt_daemon_destroy(struct vt_daemon *d)
{
	if (d->pid > 0) {
		fprintf(stderr, "harness: daemon %d still running at teardown; killing it\n",
			(int)d->pid);
		vt_daemon_print_log(d, 40);
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
		d->pid = 0;
	}
	if (!d->dir[0])
		return;
	if (getenv("VAD_TEST_KEEP")) {
		fprintf(stderr, "harness: keeping %s\n", d->dir);
		return;
	}
	nftw(d->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	d->dir[0] = '\0';
}

int vt_fd_count(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(path);
	if (!dir)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* vt_memfd_fn: add the memfd's allocated bytes to *ctx (-1 before the first). */
static int add_resident(void *ctx, int fd, const char *link, const char *path)
{
	(void)fd;
	/* The state file (daemon/state.c) is the daemon's memory, not an arena's. */
	if (strncmp(link, "/memfd:vad-state", 16) == 0)
		return 0;
	int64_t *total = ctx;
	struct stat st;
	if (stat(path, &st) == 0)
		*total = (*total < 0 ? 0 : *total) + (int64_t)st.st_blocks * 512;
	return 0;
}

int64_t vt_arena_resident_bytes(const struct vt_daemon *d)
{
	int64_t total = -1;
	vt_for_each_memfd(d->pid, add_resident, &total);
	return total;
}

int vt_fixture_daemon_setup(void **state)
{
	struct vt_daemon *d = calloc(1, sizeof(*d));
	if (!d)
		return -1;
	if (vt_daemon_setup(d, NULL, NULL) != 0) {
		vt_daemon_destroy(d);
		free(d);
		return -1;
	}
	*state = d;
	return 0;
}

int vt_fixture_blank_setup(void **state)
{
	struct vt_daemon *d = calloc(1, sizeof(*d));
	if (!d)
		return -1;
	*state = d;
	return 0;
}

int vt_fixture_daemon_teardown(void **state)
{
	struct vt_daemon *d = *state;
	if (d) {
		vt_daemon_destroy(d);
		free(d);
	}
	*state = NULL;
	return 0;
}

int vt_group_fixture_setup(void **state, size_t size, const char *vad_extra,
			   const char *arena_sections)
{
	struct vt_daemon *d = calloc(1, size);
	if (!d)
		return -1;
	*state = d;
	if (vt_daemon_setup(d, vad_extra, arena_sections) == 0)
		return 0;
	/* cmocka runs no teardown after a test's failed setup (only after a group's): leave
	 * nothing behind but the zeroed memory, which a teardown may still destroy and free. */
	vt_daemon_destroy(d);
	return -1;
}

int vt_group_daemon_setup(void **state, const char *vad_extra, const char *arena_sections)
{
	return vt_group_fixture_setup(state, sizeof(struct vt_daemon), vad_extra, arena_sections);
}

int vt_group_daemon_stop(void **state)
{
	struct vt_daemon *d = *state;
	if (!d)
		return -1;
	int rc = vt_daemon_stop(d);
	vt_daemon_destroy(d);
	free(d);
	*state = NULL;
	return rc;
}

int vt_group_daemon_stop_if_running(void **state)
{
	struct vt_daemon *d = *state;
	if (d && d->pid > 0)
		return vt_group_daemon_stop(state);
	return vt_fixture_daemon_teardown(state);
}
