# packaging/install.mk - `make install`, `make uninstall` and `make deb`.
# Included at the end of the top-level Makefile (`include packaging/install.mk`); uses its
# O, PREFIX, DESTDIR, VAD, VACTL, LIBVAD_A and LIBVAD_SO.
#
#   make install PREFIX=/usr/local DESTDIR=     binaries, library, header, libvad.pc, units,
#                                               sysusers/tmpfiles, vad.conf, man pages; then
#                                               the next steps for that prefix
#   make uninstall PREFIX=... DESTDIR=...       removes exactly what install put there
#   make deb                                    Debian packages into $(O)/deb (needs debhelper)
#
# Set DEB_HOST_MULTIARCH (e.g. x86_64-linux-gnu) to put the library under lib/<triplet>.
# An existing vad.conf is never overwritten, and uninstall keeps one that was edited.
#
# The system prefixes (/usr, /usr/local) put vad.conf in /etc/vad, where vad looks without -c,
# and refresh the dynamic linker's cache (as root, without DESTDIR). Any other prefix keeps
# everything below it, writes nothing else (its vad.conf: PREFIX/etc/vad, stats database under
# PREFIX/var/lib/vad, the socket by the default path rule) and prints how to use it from there
# (packaging/install-next-steps).

INSTALL         ?= install
VAD_VERSION     := $(shell sed -n 's/^\#define VAD_VERSION_STRING "\(.*\)"/\1/p' client/vad.h)

BINDIR          ?= $(PREFIX)/bin
SBINDIR         ?= $(PREFIX)/sbin
LIBDIR          ?= $(PREFIX)/lib$(if $(DEB_HOST_MULTIARCH),/$(DEB_HOST_MULTIARCH))
INCLUDEDIR      ?= $(PREFIX)/include
PKGCONFIGDIR    ?= $(LIBDIR)/pkgconfig
MANDIR          ?= $(PREFIX)/share/man
SYSTEM_PREFIX   := $(filter /usr /usr/local,$(patsubst %/,%,$(PREFIX)))
SYSCONFDIR      ?= $(if $(SYSTEM_PREFIX),/etc,$(PREFIX)/etc)
LOCALSTATEDIR   ?= $(if $(SYSTEM_PREFIX),/var,$(PREFIX)/var)
# Debian 12 keeps units under /lib (systemd.pc: systemdsystemunitdir); other prefixes
# keep everything below the prefix.
ifeq ($(PREFIX),/usr)
UNITDIR         ?= /lib/systemd/system
else
UNITDIR         ?= $(PREFIX)/lib/systemd/system
endif
SYSUSERSDIR     ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR     ?= $(PREFIX)/lib/tmpfiles.d

# libvad.so.0.1.0 -> soname libvad.so.0 -> link name libvad.so
LIBVAD_REAL     := $(notdir $(LIBVAD_SO))
LIBVAD_SONAME   := $(basename $(basename $(LIBVAD_REAL)))
LIBVAD_LINK     := $(basename $(LIBVAD_SONAME))

MAN_PAGES       := packaging/man/vad.8 packaging/man/vactl.8 packaging/man/vad.conf.5 \
		   packaging/man/libvad.3
UNITS           := packaging/systemd/vad.service packaging/systemd/vad.socket

# Every path install creates, relative to DESTDIR, for uninstall.
INSTALLED_FILES := $(SBINDIR)/vad $(BINDIR)/vactl \
		   $(LIBDIR)/$(LIBVAD_REAL) $(LIBDIR)/$(LIBVAD_SONAME) $(LIBDIR)/$(LIBVAD_LINK) \
		   $(LIBDIR)/libvad.a $(INCLUDEDIR)/vad.h $(PKGCONFIGDIR)/libvad.pc \
		   $(addprefix $(UNITDIR)/,$(notdir $(UNITS))) \
		   $(SYSUSERSDIR)/vad.conf $(TMPFILESDIR)/vad.conf \
		   $(foreach m,$(MAN_PAGES),$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m)))
# Prometheus alert rules and a Grafana dashboard for the daemon's /metrics (metrics_listen).
SHAREDIR        ?= $(PREFIX)/share/vad
MONITORING      := packaging/prometheus/vad-rules.yml packaging/grafana/vad-dashboard.json
INSTALLED_FILES += $(SHAREDIR)/prometheus/vad-rules.yml $(SHAREDIR)/grafana/vad-dashboard.json

.PHONY: install uninstall deb

$(O)/libvad.pc: packaging/libvad.pc.in client/vad.h
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' \
	    -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${exec_prefix}/%,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' \
	    -e 's|@VERSION@|$(VAD_VERSION)|' $< > $@.tmp
	mv $@.tmp $@

# The pc file depends on where it is installed: regenerate it on every install.
.PHONY: $(O)/libvad.pc

# vad.conf as installed: the shipped one for a system prefix; below any other prefix, its
# stats database moves below the prefix and the socket follows the default path rule (a
# daemon run by hand from there has no /run/vad or /var/lib/vad made for it).
$(O)/vad.conf: conf/vad.conf
	@mkdir -p $(dir $@)
	$(if $(SYSTEM_PREFIX),cp $< $@.tmp,sed -e 's|^stats_db = /var/lib/vad/|stats_db = $(LOCALSTATEDIR)/lib/vad/|' \
	    -e 's|^socket = /run/vad/vad.sock|# socket: the default path rule (vad --print-socket)|' $< > $@.tmp)
	mv $@.tmp $@
.PHONY: $(O)/vad.conf

install: $(VAD) $(VACTL) $(LIBVAD_A) $(LIBVAD_SO) $(O)/libvad.pc $(O)/vad.conf
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(SYSCONFDIR)/vad \
		$(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(if $(SYSTEM_PREFIX),,$(DESTDIR)$(LOCALSTATEDIR)/lib/vad)
	$(INSTALL) -m 0755 $(VAD) $(DESTDIR)$(SBINDIR)/vad
	$(INSTALL) -m 0755 $(VACTL) $(DESTDIR)$(BINDIR)/vactl
	$(INSTALL) -m 0644 $(LIBVAD_SO) $(DESTDIR)$(LIBDIR)/$(LIBVAD_REAL)
	ln -sf $(LIBVAD_REAL) $(DESTDIR)$(LIBDIR)/$(LIBVAD_SONAME)
	ln -sf $(LIBVAD_SONAME) $(DESTDIR)$(LIBDIR)/$(LIBVAD_LINK)
	$(INSTALL) -m 0644 $(LIBVAD_A) $(DESTDIR)$(LIBDIR)/libvad.a
	$(INSTALL) -m 0644 client/vad.h $(DESTDIR)$(INCLUDEDIR)/vad.h
	$(INSTALL) -m 0644 $(O)/libvad.pc $(DESTDIR)$(PKGCONFIGDIR)/libvad.pc
	@# The units name /usr/sbin/vad and /etc/vad; point them at this prefix.
	for u in $(UNITS); do \
		sed -e 's|/usr/sbin/vad|$(SBINDIR)/vad|g' -e 's|/etc/vad/|$(SYSCONFDIR)/vad/|g' \
			$$u > $(DESTDIR)$(UNITDIR)/$${u##*/}.tmp && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$${u##*/}.tmp && \
		mv $(DESTDIR)$(UNITDIR)/$${u##*/}.tmp $(DESTDIR)$(UNITDIR)/$${u##*/} || exit 1; \
	done
	$(INSTALL) -m 0644 packaging/systemd/sysusers.conf $(DESTDIR)$(SYSUSERSDIR)/vad.conf
	$(INSTALL) -m 0644 packaging/systemd/tmpfiles.conf $(DESTDIR)$(TMPFILESDIR)/vad.conf
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/vad/vad.conf ]; then \
		echo "install: keeping existing $(DESTDIR)$(SYSCONFDIR)/vad/vad.conf"; \
	else \
		echo "$(INSTALL) -m 0644 $(O)/vad.conf $(DESTDIR)$(SYSCONFDIR)/vad/vad.conf"; \
		$(INSTALL) -m 0644 $(O)/vad.conf $(DESTDIR)$(SYSCONFDIR)/vad/vad.conf; \
	fi
	for m in $(MAN_PAGES); do \
		s=$${m##*.}; $(INSTALL) -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/$${m##*/} || exit 1; \
	done
	$(INSTALL) -d $(DESTDIR)$(SHAREDIR)/prometheus $(DESTDIR)$(SHAREDIR)/grafana
	$(INSTALL) -m 0644 packaging/prometheus/vad-rules.yml $(DESTDIR)$(SHAREDIR)/prometheus/
	$(INSTALL) -m 0644 packaging/grafana/vad-dashboard.json $(DESTDIR)$(SHAREDIR)/grafana/
	@# A real install as root in a system prefix refreshes the dynamic linker's cache (for
	@# lib/ under /usr/local); other prefixes never touch /etc/ld.so.cache.
	@if [ -n "$(SYSTEM_PREFIX)" ] && [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ] && \
		command -v ldconfig >/dev/null; then echo ldconfig; ldconfig; \
	fi
	@[ -n "$(DESTDIR)" ] || SYSTEM_PREFIX="$(SYSTEM_PREFIX)" PREFIX="$(PREFIX)" \
		SBINDIR="$(SBINDIR)" BINDIR="$(BINDIR)" LIBDIR="$(LIBDIR)" \
		PKGCONFIGDIR="$(PKGCONFIGDIR)" MANDIR="$(MANDIR)" SYSCONFDIR="$(SYSCONFDIR)" \
		SYSUSERSDIR="$(SYSUSERSDIR)" TMPFILESDIR="$(TMPFILESDIR)" UNITDIR="$(UNITDIR)" \
		packaging/install-next-steps

uninstall: $(O)/vad.conf
	rm -f $(addprefix $(DESTDIR),$(INSTALLED_FILES))
	@# The configuration goes only if it is still the one install wrote.
	@c=$(DESTDIR)$(SYSCONFDIR)/vad/vad.conf; \
	if [ -e $$c ] && cmp -s $(O)/vad.conf $$c; then \
		echo "rm -f $$c"; rm -f $$c; \
	elif [ -e $$c ]; then \
		echo "uninstall: keeping edited $$c"; \
	fi
	@# Directories install may have created, only while empty (shared ones never are).
	@for d in $(SHAREDIR)/prometheus $(SHAREDIR)/grafana $(SHAREDIR); do \
		rmdir $(DESTDIR)$$d 2>/dev/null || true; done
	@for d in $(SYSCONFDIR)/vad $(UNITDIR) $(patsubst %/,%,$(dir $(UNITDIR))) $(SYSUSERSDIR) \
		$(TMPFILESDIR) $(if $(SYSTEM_PREFIX),,$(LOCALSTATEDIR)/lib/vad); do \
		rmdir $(DESTDIR)$$d 2>/dev/null || true; done
	@if [ -n "$(SYSTEM_PREFIX)" ] && [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ] && \
		command -v ldconfig >/dev/null; then echo ldconfig; ldconfig; \
	fi

# Debian packages vad, libvad0, libvad-dev and python3-vad, built from a copy of this tree.
deb:
	packaging/build-deb $(O)/deb
