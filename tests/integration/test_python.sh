#!/bin/sh
# test_python.sh - the Python binding (client/python), end to end:
#   - the extension module builds in the tree (build/python, linked with the tree's libvad;
#     with ASan+UBSan in asan mode);
#   - the pytest suite tests/python passes against a real daemon of the tree;
#   - (normal mode) `pip install client/python` into a fresh venv builds it against a libvad
#     installed with `make install DESTDIR=... PREFIX=/usr/local`, and the installed package
#     imports, talks to a daemon and shows its documentation (help(vad)).
# asan: python3 is not instrumented, so libasan is preloaded (leak checking off: the
# interpreter keeps its memory at exit). tsan: skipped, TSan cannot follow an uninstrumented
# interpreter's locking (the GIL) and reports its own threads as racing.
# Run by tests/run-tests with VAD_BUILD_DIR set; prints "N passed, N failed".
set -u

cd "$(dirname "$0")/../.." || exit 1
build=${VAD_BUILD_DIR:?VAD_BUILD_DIR must name the build tree (tests/run-tests sets it)}
mode=${VAD_TEST_MODE:-normal}
python=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1

if [ "$mode" = tsan ]; then
	echo "SKIP: the Python binding under TSan: python3 is not instrumented, so TSan cannot"
	echo "      see the GIL's locking and reports the interpreter's own threads as races"
	echo "test_python: 0 passed, 0 failed"
	exit 0
fi

# shellcheck source=tests/integration/checks.sh
. tests/integration/checks.sh
checks_begin vad-python-test

case "$mode" in
asan) san=asan ;;
*) san="" ;;
esac
# Build only the module (a sanitizer tree links libvad.a into it: it has no libvad.so);
# -o keeps make from relinking what the tree holds.
make_cmd="make --no-print-directory O=$build SAN=$san"
for artifact in vad vactl libvad.a libvad.so.0.1.0; do
	[ -e "$build/$artifact" ] && make_cmd="$make_cmd -o $build/$artifact"
done
# shellcheck disable=SC2086
check "the extension module builds in $build/python" $make_cmd python

run_env=""
if [ "$mode" = asan ]; then
	libasan=$(cc -print-file-name=libasan.so)
	run_env="LD_PRELOAD=$libasan ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
fi

# ---- the pytest suite --------------------------------------------------------------------
run_pytest() {
	# shellcheck disable=SC2086
	env $run_env "$python" -m pytest -p no:cacheprovider -q -rs tests/python >"$tmp/pytest" 2>&1
	rc=$?
	cat "$tmp/pytest"
	return $rc
}
t0=$(date +%s)
if run_pytest >"$tmp/out" 2>&1; then
	pass "pytest tests/python: $(tail -n 1 "$tmp/pytest") ($(($(date +%s) - t0))s)"
else
	fail "pytest tests/python: $(tail -n 1 "$tmp/pytest") ($(($(date +%s) - t0))s)"
fi

# ---- pip install into a venv, against an installed libvad --------------------------------
if [ "$mode" != normal ]; then
	echo "SKIP: pip install into a venv (normal mode only: an installed libvad has no sanitizer)"
	echo "test_python: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
fi
dest=$tmp/dest
lib=$dest/usr/local/lib
# Installed from a private tree holding copies of the build's artifacts: install writes
# O/libvad.pc, and test_packaging.sh may be installing from the build tree meanwhile.
install_from_copy() {
	mkdir -p "$tmp/o"
	inst="make --no-print-directory O=$tmp/o"
	for artifact in vad vactl libvad.a libvad.so.0.1.0; do
		cp -p "$build/$artifact" "$tmp/o/$artifact" || return 1
		inst="$inst -o $tmp/o/$artifact"
	done
	$inst install DESTDIR="$dest" PREFIX=/usr/local
}
check "make install DESTDIR PREFIX=/usr/local (libvad for pip)" install_from_copy
# pip builds in the source tree: build a copy, so the checkout stays clean.
cp -r client/python "$tmp/src"
rm -rf "$tmp/src/build" "$tmp/src"/*.egg-info
check "python3 -m venv --system-site-packages" "$python" -m venv --system-site-packages \
	"$tmp/venv"
check "pip install --no-build-isolation --no-index client/python (pkg-config libvad)" \
	env PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dest" \
	"$tmp/venv/bin/pip" install --no-build-isolation --no-index --no-cache-dir "$tmp/src"
venv_python=$tmp/venv/bin/python
ext=$(ls "$tmp"/venv/lib/python3*/site-packages/vad/_vad*.so 2>/dev/null | head -n 1)
check "the installed module links the installed libvad.so.0, not the tree's" \
	sh -c "[ -n '$ext' ] && readelf -d '$ext' | grep -q 'NEEDED.*\[libvad.so.0\]' &&
	       ! readelf -d '$ext' | grep -q 'RUNPATH\|RPATH' &&
	       [ -e \"\$(dirname '$ext')/py.typed\" ] && [ -e \"\$(dirname '$ext')/_vad.pyi\" ]"
# help(vad) shows the package's documentation, every public class and their methods.
show_help() {
	(cd "$tmp" && LD_LIBRARY_PATH="$lib" "$venv_python" -c "import vad; help(vad)") \
		>"$tmp/help" || return 1
	for want in "Python binding of libvad" "class Client" "class Range" "class Error" \
		"class QuotaExceeded" "class DaemonGone" "alloc(self, /, size, align=0, arena=None, populate=False, timeout=None)" \
		"attach_ndarray(self, /, token, shape" "buffer protocol\|writable buffer" \
		"range_of(obj, /)"; do
		grep -q "$want" "$tmp/help" || { echo "help(vad) lacks: $want"; cat "$tmp/help"; return 1; }
	done
	echo "help(vad): $(wc -l <"$tmp/help") lines"
}
check "python3 -c 'import vad; help(vad)' shows the documentation" show_help

cat >"$tmp/vad.conf" <<CONF
[vad]
socket = $tmp/vad.sock
[arena default]
size = 64M
CONF
env -u NOTIFY_SOCKET -u LISTEN_FDS -u LISTEN_PID -u VAD_SOCKET "$build/vad" -c "$tmp/vad.conf" \
	--foreground >"$tmp/vad.log" 2>&1 &
daemon_pid=$!
installed_roundtrip() {
	i=0
	while [ ! -S "$tmp/vad.sock" ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	(cd "$tmp" && LD_LIBRARY_PATH="$lib" "$venv_python" -c "
import numpy, vad
assert vad.__file__.startswith('$tmp/venv'), vad.__file__
with vad.Client('$tmp/vad.sock', name='installed') as c:
    a = c.ndarray((4, 4), 'float32')
    a[:] = 2.5
    b = c.attach_ndarray(vad.range_of(a).share(), (4, 4), 'float32')
    assert (b == 2.5).all()
    del a, b
    assert c.stats()['held_ranges'] == 0
print('ok')")
}
check "the installed package allocates, shares and frees with a daemon" installed_roundtrip
kill -TERM "$daemon_pid" 2>/dev/null
wait "$daemon_pid"
daemon_pid=""

echo "test_python: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
