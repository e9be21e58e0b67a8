# client/python/python.mk - the Python binding vad._vad built in the tree, over the in-tree
# libvad.so (found through an $ORIGIN rpath; libvad.a linked in for SAN= trees, which have
# no libvad.so), with the package files beside it:
#   build/python/vad/{__init__.py,_vad.pyi,py.typed,_vad<EXT_SUFFIX>}; PYTHONPATH=build/python
#   make bench-python    Python alloc+free round trip against libvad's, side by side
# Included from the Makefile; uses its O, CC, CFLAGS, CPPFLAGS, LDFLAGS, VAD and LIBVAD_SO.
# `pip install client/python` builds the same sources against an installed libvad (setup.py).
PYTHON        ?= /usr/bin/python3
PY_INCLUDE    := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_EXT_SUFFIX := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_SRC        := $(wildcard client/python/src/*.c)
PY_PKG        := $(O)/python/vad
PY_EXT        := $(PY_PKG)/_vad$(PY_EXT_SUFFIX)
PY_FILES      := $(addprefix $(PY_PKG)/,__init__.py _vad.pyi py.typed)
PY_BENCH_C    := $(O)/python/bench_roundtrip
ifeq ($(SAN),)
PY_LIBVAD      := $(LIBVAD_SO)
PY_LIBVAD_LINK := -L$(O) -l:libvad.so.0 -Wl,-rpath,'$$ORIGIN/../..'
else
PY_LIBVAD      := $(LIBVAD_A)
PY_LIBVAD_LINK := $(LIBVAD_A) -Wl,--exclude-libs,ALL $(CLIENT_LIBS)
endif

.PHONY: python bench-python
python: $(PY_EXT) $(PY_FILES)

# Python's headers are not ours to keep warning-free; only PyInit__vad is exported.
$(call obj,$(PY_SRC)): CPPFLAGS += -isystem $(PY_INCLUDE)
$(call obj,$(PY_SRC)): CFLAGS += -fvisibility=hidden

$(PY_EXT): $(call obj,$(PY_SRC)) $(PY_LIBVAD)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -o $@ $(call obj,$(PY_SRC)) $(PY_LIBVAD_LINK)

$(PY_PKG)/%: client/python/vad/%
	@mkdir -p $(dir $@)
	cp $< $@

$(PY_BENCH_C): client/python/bench/bench_roundtrip.c $(LIBVAD_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(O) -l:libvad.so.0 \
		-Wl,-rpath,'$$ORIGIN/..'

bench-python: $(VAD) $(PY_EXT) $(PY_FILES) $(PY_BENCH_C)
	$(PYTHON) client/python/bench/bench.py $(O)
