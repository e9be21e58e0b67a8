# soak.mk - the long run (tests/soak/): many clients, mixed workloads, invariant checks, RSS
# and fd samples of the daemon. Not part of `make check`.
#   make soak                 10 minutes (SOAK_SECONDS=600); SOAK_CLIENTS=12 clients
#   make soak SOAK_SECONDS=120
# Included by the Makefile.

SOAK_SECONDS       ?= 600
SOAK_CLIENTS       ?= 12
SOAK_CHECK_SECONDS ?= 3
VASOAK             := $(O)/vasoak

.PHONY: soak

$(VASOAK): tests/soak/soak.c $(LIBTEST) $(LIBDAEMON) $(LIBVAD_A) $(LIBPROTO) $(LIBVASPACE)
	$(CC) $(CPPFLAGS) -Itests/common $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_LINK)

soak: $(VASOAK) $(VAD) $(VACTL)
	VAD_BUILD_DIR=$(O) SOAK_SECONDS=$(SOAK_SECONDS) SOAK_CLIENTS=$(SOAK_CLIENTS) \
		SOAK_CHECK_SECONDS=$(SOAK_CHECK_SECONDS) $(VASOAK)
