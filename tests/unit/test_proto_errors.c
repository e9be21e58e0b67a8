/* test_proto_errors.c - the error table (proto/errors.h) against vad.proto's enum Error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "errors.h"
#include "vad.pb-c.h"

/* Every value of enum Error is in the table under the same name, and nothing more. */
static void test_table_matches_wire_enum(void **state)
{
	(void)state;
	const ProtobufCEnumDescriptor *d = &vad__error__descriptor;
#define COUNT(name, number, sentence, label) +1
	assert_int_equal(d->n_values, 0 VAD_ERROR_TABLE(COUNT));
#undef COUNT
	for (unsigned i = 0; i < d->n_values; i++) {
		int number = d->values[i].value;
		assert_true(vad_error_known(number));
		assert_string_equal(vad_error_name(number), d->values[i].name);
		assert_non_null(vad_error_sentence(number));
		assert_non_null(vad_error_label(number));
	}
}

/* A number the enum leaves out (a gap below VAD_ERROR_MAX) is no code: no name, sentence or
 * label; the largest one is. */
static void test_gaps_are_unknown(void **state)
{
	(void)state;
	const ProtobufCEnumDescriptor *d = &vad__error__descriptor;
	for (int number = 0; number <= VAD_ERROR_MAX; number++) {
		bool in_enum = protobuf_c_enum_descriptor_get_value(d, number) != NULL;
		assert_int_equal(in_enum, vad_error_known(number));
		if (!in_enum) {
			assert_null(vad_error_name(number));
			assert_null(vad_error_sentence(number));
			assert_null(vad_error_label(number));
		}
	}
	assert_true(vad_error_known(VAD_ERROR_MAX));
	assert_string_equal(vad_error_name(24), "EREADONLY");
}

static void test_unknown_numbers(void **state)
{
	(void)state;
	assert_false(vad_error_known(-1));
	assert_false(vad_error_known(VAD_ERROR_MAX + 1));
	assert_null(vad_error_name(VAD_ERROR_MAX + 1));
	assert_null(vad_error_sentence(-1));
	assert_null(vad_error_label(1000));
	assert_string_equal(vad_error_label(8), "quota exceeded");
	assert_string_equal(vad_error_name(8), "EQUOTA");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_matches_wire_enum),
	    cmocka_unit_test(test_gaps_are_unknown),
	    cmocka_unit_test(test_unknown_numbers),
	};
	return cmocka_run_group_tests_name("proto errors", tests, NULL, NULL);
}
