/*
 * fuzz_config.c - libFuzzer target for the config parser: the input is written to a file
 * and loaded with vad_config_load, as `vad -c FILE` does. A file either loads into a config
 * that keeps the documented promises (at least one arena, every arena size a non-zero
 * multiple of its power-of-two quantum, names of the allowed characters, limits in range),
 * or is refused with a "FILE:LINE: reason" sentence. The first line also goes through the
 * size and duration parsers, and the parsed size back through the size formatter.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static char path[96];

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_config: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *tmp = getenv("TMPDIR");
	snprintf(path, sizeof(path), "%s/fuzz_config.XXXXXX",
		 tmp && *tmp && strlen(tmp) < 64 ? tmp : "/tmp");
	int fd = mkstemp(path);
	if (fd < 0)
		die("cannot create a temporary file", path);
	close(fd);
	return 0;
}

static bool name_ok(const char *name)
{
	if (!name[0] || strlen(name) > VAD_NAME_MAX)
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
			return false;
	return true;
}

static void check_loaded(const struct vad_config *cfg)
{
	if (cfg->n_arenas == 0 || !cfg->arenas)
		die("a config loaded without any arena", NULL);
	if (cfg->max_frame && (cfg->max_frame < 4096 || cfg->max_frame > (16u << 20)))
		die("max_frame outside 4K..16M was accepted", NULL);
	for (size_t i = 0; i < cfg->n_arenas; i++) {
		const struct vad_arena_conf *a = &cfg->arenas[i];
		if (!name_ok(a->name))
			die("an arena name with characters outside [A-Za-z0-9_.-]", a->name);
		if (a->quantum == 0 || (a->quantum & (a->quantum - 1)) != 0)
			die("an arena quantum that is not a power of two", a->name);
		if (a->size == 0 || a->size % a->quantum != 0)
			die("an arena size that is not a non-zero multiple of its quantum",
			    a->name);
		if (a->n_allow_uids && !a->allow_uids)
			die("allow_uids counted but missing", a->name);
		if (a->n_allow_gids && !a->allow_gids)
			die("allow_gids counted but missing", a->name);
		if ((a->n_reader_uids && !a->reader_uids) || (a->n_reader_gids && !a->reader_gids))
			die("reader_uids or reader_gids counted but missing", a->name);
		if (a->allow_any && (a->n_reader_uids || a->n_reader_gids))
			die("readers in an arena every peer may write", a->name);
		for (size_t j = 0; j < i; j++)
			if (strcmp(cfg->arenas[j].name, a->name) == 0)
				die("two arenas with one name", a->name);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fopen(path, "w");
	if (!f)
		die("cannot open the temporary file", path);
	if (size && fwrite(data, 1, size, f) != size)
		die("cannot write the temporary file", path);
	fclose(f);

	struct vad_config cfg;
	char err[1024] = "";
	if (vad_config_load(path, &cfg, err, sizeof(err)) == 0) {
		check_loaded(&cfg);
		vad_config_free(&cfg);
	} else {
		if (!err[0])
			die("a config was refused without a reason", NULL);
		if (strncmp(err, path, strlen(path)) != 0)
			die("a refusal that does not name the file", err);
	}

	/* The value parsers on the first line. */
	size_t n = 0;
	while (n < size && n < 256 && data[n] != '\n')
		n++;
	char line[257];
	memcpy(line, data, n);
	line[n] = '\0';
	uint64_t v;
	if (vad_parse_size(line, &v) == 0) {
		char buf[64];
		const char *s = vad_format_size(v, buf, sizeof(buf));
		if (!s || !s[0])
			die("vad_format_size gave nothing for", line);
	}
	(void)vad_parse_duration_ms(line, &v);
	return 0;
}
