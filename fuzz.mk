# fuzz.mk - libFuzzer targets (tests/fuzz/), built with clang from the sources directly.
#   make fuzz         every target for FUZZ_SECONDS (default 60) each, after replaying the
#                     regression inputs in tests/fuzz/regress/<target>/
#   make fuzz-smoke   the regression inputs, then every target for FUZZ_SMOKE_SECONDS (10)
#   make fuzz-build   just build build-fuzz/fuzz_{frame,session,config} and the seed corpora
# Instrumented objects (ASan + UBSan + coverage) live in FUZZ_O, apart from the normal build.
# Included by the Makefile.

FUZZ_O             ?= build-fuzz
FUZZ_CC            ?= clang
FUZZ_SECONDS       ?= 60
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_TARGETS       := frame session config

FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=gnu11 -O1 -g -pthread -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow \
	       -Wno-unused-parameter $(FUZZ_SAN)
FUZZ_CPPFLAGS := -Ilib -Iproto -I$(FUZZ_O)/proto -Idaemon -Itests/fuzz
FUZZ_LIBS   := -linih -lprotobuf-c -levent_core -lsystemd -lpthread -lm

FUZZ_LIB_SRC := $(wildcard lib/*.c) $(wildcard proto/*.c) \
		$(filter-out daemon/main.c,$(wildcard daemon/*.c))
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_O)/obj/%.o,$(FUZZ_LIB_SRC)) $(FUZZ_O)/obj/gen/vad.pb-c.o
FUZZ_BINS    := $(addprefix $(FUZZ_O)/fuzz_,$(FUZZ_TARGETS))
FUZZ_DEPS_A  := $(FUZZ_O)/libfuzzdeps.a

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-seeds

fuzz-build: $(FUZZ_BINS) fuzz-seeds

$(FUZZ_O)/proto/vad.pb-c.c $(FUZZ_O)/proto/vad.pb-c.h: proto/vad.proto
	@mkdir -p $(FUZZ_O)/proto
	protoc-c --proto_path=proto --c_out=$(FUZZ_O)/proto proto/vad.proto

# The code under test: coverage-instrumented, not linked with the fuzzer's main.
$(FUZZ_O)/obj/%.o: %.c $(FUZZ_O)/proto/vad.pb-c.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_O)/obj/gen/vad.pb-c.o: $(FUZZ_O)/proto/vad.pb-c.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(filter-out -Wshadow,$(FUZZ_CFLAGS)) \
		-fsanitize=fuzzer-no-link -c $< -o $@

# An archive, so each target links only what it calls (no SQLite or systemd; libevent because
# a session may queue waiting allocations, which only a session on a worker ever does).
$(FUZZ_DEPS_A): $(FUZZ_LIB_OBJ)
	@rm -f $@; ar rcs $@ $^

$(FUZZ_O)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/session_script.h $(FUZZ_DEPS_A)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_DEPS_A) \
		$(FUZZ_LIBS)

# Seeds from real requests, written by a plain (uninstrumented) generator.
$(FUZZ_O)/gen_corpus: tests/fuzz/gen_corpus.c tests/fuzz/session_script.h proto/frame.c \
		      $(FUZZ_O)/proto/vad.pb-c.c
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) -std=gnu11 -O1 -g -Wall -Wextra -Werror -Wshadow \
		-o $@ tests/fuzz/gen_corpus.c proto/frame.c $(FUZZ_O)/proto/vad.pb-c.c \
		-lprotobuf-c

fuzz-seeds: $(FUZZ_O)/gen_corpus
	@rm -rf $(FUZZ_O)/seeds
	$(FUZZ_O)/gen_corpus $(FUZZ_O)/seeds conf/vad.conf

fuzz: fuzz-build
	tests/fuzz/run-fuzz $(FUZZ_O) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-build
	tests/fuzz/run-fuzz $(FUZZ_O) $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)

-include $(shell find $(FUZZ_O)/obj -name '*.d' 2>/dev/null)
