/* nobody_path.c - a path to a build binary that uid nobody can execute.
 *
 * Tests that drop to nobody exec the daemon or vactl from the build tree. A checkout in
 * root's home (/root is 0700) puts those binaries where nobody cannot reach them, so such a
 * binary is copied once per test process into a
 * directory of its own under $TMPDIR that everyone can traverse, and removed at exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define MAX_PUBLIC_BINS 8

static char public_dir[PATH_MAX];
static char public_bins[MAX_PUBLIC_BINS][PATH_MAX];
static size_t n_public_bins;
static pid_t public_owner; /* only the process that made the directory removes it */

/* Can someone who is neither owner nor in the group reach path (every directory on the way
 * searchable by others, the file itself executable by others)? */
static bool others_can_exec(const char *path)
{
	char prefix[PATH_MAX];
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(prefix) || path[0] != '/')
		return false;
	for (size_t i = 1; i <= len; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		memcpy(prefix, path, i);
		prefix[i] = '\0';
		struct stat st;
		if (stat(prefix, &st) != 0 || !(st.st_mode & S_IXOTH))
			return false;
	}
	return true;
}

static void remove_public_bins(void)
{
	if (public_owner != getpid())
		return;
	for (size_t i = 0; i < n_public_bins; i++)
		unlink(public_bins[i]);
	if (public_dir[0])
		rmdir(public_dir);
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -1;
	struct stat st;
	int out = -1;
	if (fstat(in, &st) == 0)
		out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	int rc = out < 0 ? -1 : 0;
	for (off_t done = 0; rc == 0 && done < st.st_size;) {
		ssize_t n = sendfile(out, in, NULL, (size_t)(st.st_size - done));
		if (n <= 0)
			rc = -1;
		else
			done += n;
	}
	int saved = errno;
	close(in);
	if (out >= 0 && close(out) != 0)
		rc = -1;
	errno = saved;
	return rc;
}

const char *vt_nobody_path(const char *path)
{
	if (others_can_exec(path))
		return path;
	for (size_t i = 0; i < n_public_bins; i++) {
		const char *base = strrchr(public_bins[i], '/') + 1;
		if (strcmp(base, strrchr(path, '/') ? strrchr(path, '/') + 1 : path) == 0)
			return public_bins[i];
	}
	if (n_public_bins == MAX_PUBLIC_BINS)
		return path;
	if (!public_dir[0]) {
		if (vt_make_temp_dir(public_dir, sizeof(public_dir), "vt-bin") != 0 ||
		    chmod(public_dir, 0755) != 0) {
			fprintf(stderr, "harness: no directory for binaries nobody can run: %s\n",
				strerror(errno));
			public_dir[0] = '\0';
			return path;
		}
		public_owner = getpid();
		atexit(remove_public_bins);
	}
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	char *dst = public_bins[n_public_bins];
	if ((size_t)snprintf(dst, PATH_MAX, "%s/%s", public_dir, base) >= PATH_MAX)
		return path;
	if (copy_file(path, dst) != 0) {
		fprintf(stderr, "harness: cannot place %s where nobody can run it (%s): %s\n", path,
			dst, strerror(errno));
		unlink(dst);
		return path;
	}
	n_public_bins++;
	return dst;
}
