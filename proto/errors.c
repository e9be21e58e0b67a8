/* errors.c - the error table's names, sentences and labels; see errors.h. */
#include "errors.h"

#include <stddef.h>

#include "vad.pb-c.h"

/* The table and proto/vad.proto's enum Error agree, name by name, and nothing is missing. */
#define CHECK_WIRE(name, number, sentence, label)                                                  \
	_Static_assert(VAD__ERROR__##name == number, "vad.Error " #name " differs from errors.h");
VAD_ERROR_TABLE(CHECK_WIRE)
#undef CHECK_WIRE
/* Numbers may leave gaps, but none is past VAD_ERROR_MAX, and that one is in the table
 * (vad_error_known's switch refuses a number given twice). */
#define NOT_PAST_MAX(name, number, sentence, label)                                                \
	_Static_assert(number >= 0 && number <= VAD_ERROR_MAX, #name " is past VAD_ERROR_MAX");
VAD_ERROR_TABLE(NOT_PAST_MAX)
#undef NOT_PAST_MAX
#define IS_MAX(name, number, sentence, label) || number == VAD_ERROR_MAX
_Static_assert(0 VAD_ERROR_TABLE(IS_MAX), "VAD_ERROR_MAX is no number of the table");
#undef IS_MAX

#define NAME(name, number, sentence, label) [number] = #name,
static const char *const names[] = {VAD_ERROR_TABLE(NAME)};
#undef NAME
#define SENTENCE(name, number, sentence, label) [number] = sentence,
static const char *const sentences[] = {VAD_ERROR_TABLE(SENTENCE)};
#undef SENTENCE
#define LABEL(name, number, sentence, label) [number] = label,
static const char *const labels[] = {VAD_ERROR_TABLE(LABEL)};
#undef LABEL

bool vad_error_known(int number)
{
	switch (number) {
#define CASE(name, number, sentence, label) case number:
		VAD_ERROR_TABLE(CASE)
#undef CASE
		return true;
	default:
		return false;
	}
}

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
