/* errors.c - the error table's names, sentences and labels; see errors.h. */
#include "errors.h"

#include <stddef.h>

#include "vad.pb-c.h"

/* The table and proto/vad.proto's enum Error agree, name by name, and nothing is missing. */
#define CHECK_WIRE(name, number, sentence, label)                                                  \
	_Static_assert(VAD__ERROR__##name == number, "vad.Error " #name " differs from errors.h");
VAD_ERROR_TABLE(CHECK_WIRE)
#undef CHECK_WIRE
#define COUNT(name, number, sentence, label) +1
_Static_assert(VAD_ERROR_MAX + 1 == 0 VAD_ERROR_TABLE(COUNT), "VAD_ERROR_MAX is not the last");
#undef COUNT

#define NAME(name, number, sentence, label) [number] = #name,
static const char *const names[] = {VAD_ERROR_TABLE(NAME)};
#undef NAME
#define SENTENCE(name, number, sentence, label) [number] = sentence,
static const char *const sentences[] = {VAD_ERROR_TABLE(SENTENCE)};
#undef SENTENCE
#define LABEL(name, number, sentence, label) [number] = label,
static const char *const labels[] = {VAD_ERROR_TABLE(LABEL)};
#undef LABEL

const char *vad_error_name(int number)
{
	return vad_error_known(number) ? names[number] : NULL;
}

const char *vad_error_sentence(int number)
{
	return vad_error_known(number) ? sentences[number] : NULL;
}

const char *vad_error_label(int number)
{
	return vad_error_known(number) ? labels[number] : NULL;
}
