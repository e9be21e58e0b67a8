/* memfds.c - the memfds a process holds, from /proc/PID/fd; see harness.h. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

int vt_for_each_memfd(pid_t pid, vt_memfd_fn fn, void *ctx)
{
	char dir_path[64];
	snprintf(dir_path, sizeof(dir_path), "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(dir_path);
	if (!dir)
		return -1;
	int rc = 0;
	for (struct dirent *e; !rc && (e = readdir(dir));) {
		if (e->d_name[0] == '.')
			continue;
		char path[sizeof(dir_path) + 256 + 2], link[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", dir_path, e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strncmp(link, "/memfd:", 7) == 0)
			rc = fn(ctx, atoi(e->d_name), link, path);
	}
	closedir(dir);
	return rc;
}

/* vt_memfd_fn: stop at the memfd named ctx ("vad:NAME" in "/memfd:vad:NAME (deleted)"). */
static int is_named(void *ctx, int fd, const char *link, const char *path)
{
	(void)path;
	const char *want = ctx;
	size_t len = strlen(want);
	const char *name = link + 7;
	return strncmp(name, want, len) == 0 && (name[len] == '\0' || name[len] == ' ') ? fd + 1
											: 0;
}

int vt_memfd_named(pid_t pid, const char *name)
{
	int rc = vt_for_each_memfd(pid, is_named, (void *)name);
	return rc > 0 ? rc - 1 : -1;
}
