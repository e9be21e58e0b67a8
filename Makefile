# vad - one entry point: build, run, check, bench, install.
#   make            build everything into build/
#   make run        start the daemon in the foreground with a development config
#   make check      every test: normal build, ASan+UBSan build, TSan build
#   make bench      the allocator benchmark (vabench) with baselines
# Variants: O=<dir> SAN=asan|tsan builds with sanitizers; fuzzers: make fuzz-build (fuzz.mk, clang).

O      ?= build
SAN    ?=
CC     ?= cc
PREFIX ?= /usr/local
DESTDIR ?=

WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
OPT     := -O2 -g
ifeq ($(SAN),asan)
OPT     := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ifeq ($(SAN),tsan)
OPT     := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
endif
CFLAGS  ?=
CFLAGS  += -std=gnu11 $(OPT) $(WARN) -pthread -fPIC -D_GNU_SOURCE
CPPFLAGS += -Ilib -Iproto -I$(O)/proto -Idaemon -Iclient
LDFLAGS += $(filter -fsanitize=%,$(OPT)) -pthread

DAEMON_LIBS := -levent_core -levent_pthreads -linih -lprotobuf-c -lsqlite3 -lsystemd -lm
CLIENT_LIBS := -lprotobuf-c
TEST_LIBS   := -lcmocka -ljson-c

LIB_SRC     := $(wildcard lib/*.c)
PROTO_SRC   := $(wildcard proto/*.c)
DAEMON_SRC  := $(filter-out daemon/main.c,$(wildcard daemon/*.c))
LIBVAD_SRC  := $(wildcard client/libvad/*.c)
VACTL_SRC   := $(wildcard client/vactl/*.c)
BENCH_SRC   := $(wildcard tests/bench/*.c)
UNIT_SRC    := $(wildcard tests/unit/test_*.c)
INTEG_SRC   := $(wildcard tests/integration/test_*.c)
TESTLIB_SRC := $(wildcard tests/common/*.c)

obj = $(patsubst %.c,$(O)/obj/%.o,$(1))

LIBVASPACE  := $(O)/libvaspace.a
LIBPROTO    := $(O)/libvadproto.a
LIBDAEMON   := $(O)/libvaddaemon.a
LIBVAD_A    := $(O)/libvad.a
LIBVAD_SO   := $(O)/libvad.so.0.1.0
LIBTEST     := $(O)/libvadtest.a
VAD         := $(O)/vad
VACTL       := $(O)/vactl
VABENCH     := $(O)/vabench
UNIT_BIN    := $(patsubst tests/unit/%.c,$(O)/tests/%,$(UNIT_SRC))
INTEG_BIN   := $(patsubst tests/integration/%.c,$(O)/tests/%,$(INTEG_SRC))
PROTO_GEN   := $(O)/proto/vad.pb-c.c $(O)/proto/vad.pb-c.h

.PHONY: all deps run check check-normal check-asan check-tsan bench tests format clean install uninstall
.DEFAULT_GOAL := all

all: deps-quiet $(VAD) $(VACTL) $(LIBVAD_A) $(LIBVAD_SO) $(VABENCH) tests python

tests: $(UNIT_BIN) $(INTEG_BIN)

# Install any missing Debian package (needs root or sudo); silent when all is there.
deps deps-quiet:
	@scripts/install-deps

# Order-only on deps-quiet: with -j, everything waits for the packages (protoc-c, headers)
# instead of racing the install on a fresh machine.
$(O)/proto/vad.pb-c.c $(O)/proto/vad.pb-c.h &: proto/vad.proto | deps-quiet
	@mkdir -p $(O)/proto
	protoc-c --proto_path=proto --c_out=$(O)/proto proto/vad.proto

$(O)/obj/%.o: %.c $(PROTO_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(O)/obj/gen/vad.pb-c.o: $(O)/proto/vad.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(filter-out -Wshadow,$(CFLAGS)) -c $< -o $@

$(LIBVASPACE): $(call obj,$(LIB_SRC))
	@rm -f $@; ar rcs $@ $^
$(LIBPROTO): $(call obj,$(PROTO_SRC)) $(O)/obj/gen/vad.pb-c.o
	@rm -f $@; ar rcs $@ $^
$(LIBDAEMON): $(call obj,$(DAEMON_SRC))
	@rm -f $@; ar rcs $@ $^
$(LIBTEST): $(call obj,$(TESTLIB_SRC))
	@rm -f $@; ar rcs $@ $^ $(if $^,,/dev/null 2>/dev/null); true

$(VAD): $(O)/obj/daemon/main.o $(LIBDAEMON) $(LIBPROTO) $(LIBVASPACE)
	$(CC) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS)

$(LIBVAD_A): $(call obj,$(LIBVAD_SRC)) $(call obj,$(PROTO_SRC)) $(O)/obj/gen/vad.pb-c.o
	@rm -f $@; ar rcs $@ $^
$(LIBVAD_SO): $(call obj,$(LIBVAD_SRC)) $(call obj,$(PROTO_SRC)) $(O)/obj/gen/vad.pb-c.o
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libvad.so.0 -Wl,--version-script=client/libvad/libvad.map -o $@ $^ $(CLIENT_LIBS)
	ln -sf libvad.so.0.1.0 $(O)/libvad.so.0
	ln -sf libvad.so.0 $(O)/libvad.so

$(VACTL): $(call obj,$(VACTL_SRC)) $(LIBVAD_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS) -ljson-c -lsqlite3 -lm

$(VABENCH): $(call obj,$(BENCH_SRC)) $(LIBVASPACE) $(LIBVAD_A)
	$(CC) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS) -lm

# Tests link what their name says they test, so a half-built part elsewhere does not
# stop them: test_va_* the allocator, test_proto_* the framing, test_daemon_* the
# daemon internals; integration tests (tests/integration) link everything.
$(O)/tests/test_va_%: tests/unit/test_va_%.c $(LIBVASPACE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/common $(CFLAGS) $(LDFLAGS) -o $@ $^ $(TEST_LIBS)
$(O)/tests/test_proto_%: tests/unit/test_proto_%.c $(LIBPROTO)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/common $(CFLAGS) $(LDFLAGS) -o $@ $^ -lprotobuf-c $(TEST_LIBS)
$(O)/tests/test_daemon_%: tests/unit/test_daemon_%.c $(LIBDAEMON) $(LIBPROTO) $(LIBVASPACE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/common $(CFLAGS) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) $(TEST_LIBS)
TEST_LINK = $(LIBTEST) $(LIBDAEMON) $(LIBVAD_A) $(LIBPROTO) $(LIBVASPACE) $(DAEMON_LIBS) $(TEST_LIBS)
$(O)/tests/%: tests/integration/%.c $(LIBTEST) $(LIBDAEMON) $(LIBVAD_A) $(LIBPROTO) $(LIBVASPACE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/common $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_LINK)

# ---- running ---------------------------------------------------------------
run: deps-quiet $(VAD) $(VACTL)
	@scripts/run-dev $(O)

# Every build and every test mode: the normal build, then TSan, then ASan+UBSan, then the
# fuzz targets, each build on every core; each mode's tests (VAD_TEST_JOBS at a time, default
# 2) and fuzz-smoke run in the background as soon as their build is done, so they overlap the
# later builds (tests/run-check). Prints each mode's "N passed, N failed", fuzz-smoke's
# result and a table of when each phase ran; fails when anything failed.
NPROC := $(shell nproc 2>/dev/null || echo 2)
check: deps
	+@MAKE="$(MAKE)" NPROC=$(NPROC) tests/run-check $(O)

# One mode alone, as `make check` runs it (tests/run-tests prints "N passed, N failed").
check-normal: all
	@tests/run-tests $(O) normal

check-asan:
	$(MAKE) -j$(NPROC) O=build-asan SAN=asan tests $(addprefix build-asan/,vad vactl vabench)
	@tests/run-tests build-asan asan

check-tsan:
	$(MAKE) -j$(NPROC) O=build-tsan SAN=tsan tests $(addprefix build-tsan/,vad vactl vabench)
	@tests/run-tests build-tsan tsan

# The full matrix with baselines, then the bar ratios measured side by side in one run.
bench: all
	$(VABENCH)
	tests/bench/check-bar $(VABENCH)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
include packaging/install.mk
include fuzz.mk
include soak.mk
include bench.mk
include client/python/python.mk
