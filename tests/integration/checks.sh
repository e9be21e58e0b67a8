# checks.sh - what the shell tests share: a private $tmp, the daemon they started killed on
# exit, and pass/fail/check counting. Sourced (after `cd` to the tree's root) by
# tests/integration/test_*.sh as `checks_begin NAME`; not a test itself.
# A script that needs more cleanup defines checks_cleanup_more before sourcing this file.

passed=0
failed=0
daemon_pid=""

# checks_begin PREFIX: make $tmp (mode 0755, so a daemon under another uid can enter it) and
# arrange that it and $daemon_pid go on exit.
checks_begin() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
	chmod 0755 "$tmp"
	trap checks_cleanup EXIT
	trap 'exit 130' INT TERM
}

checks_cleanup() {
	if [ -n "$daemon_pid" ]; then
		kill "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	if command -v checks_cleanup_more >/dev/null 2>&1; then
		checks_cleanup_more
	fi
	rm -rf "$tmp"
}

pass() {
	passed=$((passed + 1))
	echo "PASS: $1"
}

# fail DESCRIPTION: count it and show the tail of the last command's output ($tmp/out).
fail() {
	failed=$((failed + 1))
	echo "FAIL: $1"
	if [ -s "$tmp/out" ]; then
		sed 's/^/    /' "$tmp/out" | tail -n 60
	fi
}

# check DESCRIPTION COMMAND...: run COMMAND with its output in $tmp/out, shown on failure.
check() {
	desc=$1
	shift
	t0=$(date +%s)
	if "$@" >"$tmp/out" 2>&1; then
		pass "$desc ($(($(date +%s) - t0))s)"
	else
		fail "$desc ($(($(date +%s) - t0))s)"
	fi
}

# Sets san and san_flags for $mode, and make_cmd: make for build tree $build that installs
# what the tree holds (-o keeps make from relinking an artifact that is there, so sources
# edited since the build do not change what is tested; a missing one, such as the sanitizer
# trees' libvad.so, is built with the tree's sanitizer).
checks_install_make() {
	case "$mode" in
	asan) san=asan; san_flags="-fsanitize=address,undefined -fno-omit-frame-pointer" ;;
	tsan) san=tsan; san_flags="-fsanitize=thread" ;;
	*) san=""; san_flags="" ;;
	esac
	make_cmd="make --no-print-directory O=$build SAN=$san"
	for artifact in vad vactl libvad.a libvad.so.0.1.0; do
		[ -e "$build/$artifact" ] && make_cmd="$make_cmd -o $build/$artifact"
	done
}
