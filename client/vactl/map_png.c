/* map_png.c - an SVG rendered to PNG by rsvg-convert (vactl map --png). */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "map_svg.h"

extern char **environ;

int vactl_svg_to_png(const char *svg, const char *png)
{
	char *const argv[] = {"rsvg-convert", "--format",  "png", "--output",
			      (char *)png,    (char *)svg, NULL};
	pid_t pid;
	int e = posix_spawnp(&pid, "rsvg-convert", NULL, NULL, argv, environ);
	if (e == ENOENT) {
		fprintf(
		    stderr,
		    "vactl: --png needs rsvg-convert, which is not on PATH (Debian: apt install "
		    "librsvg2-bin); --svg FILE writes the picture without it\n");
		return -1;
	}
	if (e) {
		fprintf(stderr, "vactl: cannot run rsvg-convert: %s\n", strerror(e));
		return -1;
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "vactl: waiting for rsvg-convert: %s\n", strerror(errno));
			return -1;
		}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr,
			"vactl: rsvg-convert could not render %s to %s (it said why above)\n", svg,
			png);
		return -1;
	}
	return 0;
}
