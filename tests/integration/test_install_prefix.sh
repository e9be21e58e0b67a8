#!/bin/sh
# test_install_prefix.sh - `make install PREFIX=DIR` (no DESTDIR) keeps to DIR and says how to
# use it from there:
#   - it writes nothing outside DIR: as root it runs in a private mount namespace where /etc
#     and /usr are read-only (an ldconfig or an /etc/vad/vad.conf would fail the install);
#     otherwise /etc is listed before and after;
#   - the tree below DIR is the expected one (vad.conf in DIR/etc/vad, its stats database
#     below DIR/var/lib/vad, its socket by the default path rule);
#   - the printed lines, followed as they stand (exports, the daemon in the background, vactl,
#     cc, ./prog), build README.md's libvad program against DIR and run it against the daemon
#     started from DIR;
#   - for /usr/local the printed sysusers.d and tmpfiles.d paths are files install wrote;
#   - `make uninstall PREFIX=DIR` removes every file.
# test_packaging.sh checks the DESTDIR installs and the units. Prints "N passed, N failed".
set -u

cd "$(dirname "$0")/../.." || exit 1
build=${VAD_BUILD_DIR:?VAD_BUILD_DIR must name the build tree (tests/run-tests sets it)}
mode=${VAD_TEST_MODE:-normal}

# shellcheck source=tests/integration/checks.sh
. tests/integration/checks.sh
checks_begin vad-prefix-test

checks_install_make
# The sanitizer trees have no libvad.so yet: build it here, outside the guarded install.
# shellcheck disable=SC2086
$make_cmd "$build/libvad.so.0.1.0" >"$tmp/out" 2>&1 || { fail "build libvad.so"; exit 1; }
make_cmd="$make_cmd -o $build/libvad.so.0.1.0"

prefix=$tmp/prefix
# guarded CMD...: run CMD where it cannot write below /etc or /usr unnoticed.
guarded() {
	if [ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null; then
		echo "(in a mount namespace with /etc and /usr read-only)"
		# shellcheck disable=SC2016 # "$@" and "$d" are the inner shell's
		unshare -m sh -c 'mount --make-rprivate / &&
			for d in /etc /usr; do
				mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" || exit 99
			done
			exec "$@"' guarded "$@"
		return
	fi
	echo "(not root: /etc listed before and after)"
	find /etc -xdev 2>/dev/null | LC_ALL=C sort >"$tmp/etc.before"
	"$@" || return
	find /etc -xdev 2>/dev/null | LC_ALL=C sort >"$tmp/etc.after"
	find /etc -xdev -newer "$tmp/etc.before" 2>/dev/null >>"$tmp/etc.after"
	LC_ALL=C sort -u "$tmp/etc.after" | diff -u "$tmp/etc.before" -
}
# shellcheck disable=SC2086
check "make install PREFIX=\$tmp/prefix writes nothing outside it" \
	guarded $make_cmd install PREFIX="$prefix"
cp "$tmp/out" "$tmp/install.log"

cat >"$tmp/expected" <<EOF
bin/vactl
etc/vad/vad.conf
include/vad.h
lib/libvad.a
lib/libvad.so
lib/libvad.so.0
lib/libvad.so.0.1.0
lib/pkgconfig/libvad.pc
lib/sysusers.d/vad.conf
lib/systemd/system/vad.service
lib/systemd/system/vad.socket
lib/tmpfiles.d/vad.conf
sbin/vad
share/man/man3/libvad.3
share/man/man5/vad.conf.5
share/man/man8/vactl.8
share/man/man8/vad.8
share/vad/grafana/vad-dashboard.json
share/vad/prometheus/vad-rules.yml
var/lib/vad/
EOF
tree_is() { # files, links and empty directories (with a trailing /) below the prefix
	(cd "$prefix" && find . \( -type f -o -type l -o -type d -empty \) | while read -r f; do
		if [ -d "$f" ]; then echo "${f#./}/"; else echo "${f#./}"; fi
	done | LC_ALL=C sort) >"$tmp/got"
	LC_ALL=C sort "$tmp/expected" | diff -u - "$tmp/got"
}
check "the tree below the prefix is the expected one" tree_is
check "its vad.conf keeps the stats database below the prefix and leaves the socket to the default rule" \
	sh -c "grep -qx 'stats_db = $prefix/var/lib/vad/stats.db' '$prefix/etc/vad/vad.conf' &&
	       ! grep -q '^socket *=' '$prefix/etc/vad/vad.conf' &&
	       '$prefix/sbin/vad' -c '$prefix/etc/vad/vad.conf' --check-config"
check "the installed unit runs the prefix's vad with the prefix's config" \
	grep -qx "ExecStart=$prefix/sbin/vad -c $prefix/etc/vad/vad.conf --foreground" \
	"$prefix/lib/systemd/system/vad.service"

# ---- the printed next steps, followed ---------------------------------------------------------
# The indented lines after "paste these lines".
sed -n '/paste these lines/,/^[^ ]/s/^  //p' "$tmp/install.log" >"$tmp/steps"
check "install printed the next steps (PATH, LD_LIBRARY_PATH, PKG_CONFIG_PATH, vad -c, cc)" \
	sh -c "grep -q '^export LD_LIBRARY_PATH=\"$prefix/lib' '$tmp/steps' &&
	       grep -q '^export PKG_CONFIG_PATH=\"$prefix/lib/pkgconfig' '$tmp/steps' &&
	       grep -q '^export PATH=\"$prefix/sbin:$prefix/bin:' '$tmp/steps' &&
	       grep -qx 'vad -c $prefix/etc/vad/vad.conf --foreground &' '$tmp/steps' &&
	       grep -q '^cc .*prog.c' '$tmp/steps'"

work=$tmp/work
mkdir -p "$work"
# README.md's libvad example, as a reader would save it.
awk '/^## Using libvad/ { s = 1 } s && /^```c$/ { f = 1; next } f && /^```$/ { exit } f' \
	README.md >"$work/prog.c"

# Each line in one shell, in order: a line ending in & starts the daemon, which the next
# line needs listening (a person types slower than that; here it is waited for, bounded).
follow_steps() (
	cd "$work" || exit 1
	daemon_pid=""
	trap '[ -z "$daemon_pid" ] || kill "$daemon_pid" 2>/dev/null' EXIT
	# The test's own socket, so no other daemon is reached; vad, libvad and vactl all read it.
	VAD_SOCKET=$tmp/run/vad.sock
	export VAD_SOCKET
	unset INVOCATION_ID JOURNAL_STREAM NOTIFY_SOCKET LISTEN_FDS LISTEN_PID LD_LIBRARY_PATH \
		PKG_CONFIG_PATH
	# The sanitizer builds' libvad.so needs its runtime in the program too.
	# shellcheck disable=SC2086,SC2317
	cc() { command cc $san_flags "$@"; }
	while IFS= read -r line; do
		echo "\$ $line"
		case "$line" in
		*"&")
			eval "${line%&} >'$tmp/vad.log' 2>&1 &"
			daemon_pid=$!
			i=0
			until [ -S "$VAD_SOCKET" ] && vactl --timeout 5s status >/dev/null 2>&1; do
				if ! kill -0 "$daemon_pid" 2>/dev/null || [ $i -ge 300 ]; then
					cat "$tmp/vad.log"
					exit 1
				fi
				sleep 0.1
				i=$((i + 1))
			done
			;;
		*)
			eval "$line" || exit 1
			;;
		esac
	done <"$tmp/steps"
	[ -n "$daemon_pid" ] || exit 1
	kill -TERM "$daemon_pid" && wait "$daemon_pid"
	rc=$?
	daemon_pid=""
	[ "$rc" -eq 0 ] || { cat "$tmp/vad.log"; exit 1; }
	# the program ran against that daemon, through the installed library
	ldd ./prog | grep "libvad.so.0 => $prefix/lib/libvad.so.0"
)
check "the printed steps build README's program against the prefix and run it against its vad" \
	follow_steps
check "... and the daemon kept its stats database below the prefix" \
	test -s "$prefix/var/lib/vad/stats.db"

# ---- a system prefix: the printed paths exist ---------------------------------------------------
dest=$tmp/dest
# shellcheck disable=SC2086
check "make install DESTDIR PREFIX=/usr/local (prints nothing to follow: staged)" \
	sh -c "$make_cmd install DESTDIR='$dest' PREFIX=/usr/local | grep -q 'paste' && exit 1;
	       [ -e '$dest/etc/vad/vad.conf' ]"
SYSTEM_PREFIX=/usr/local PREFIX=/usr/local SBINDIR=/usr/local/sbin BINDIR=/usr/local/bin \
	LIBDIR=/usr/local/lib PKGCONFIGDIR=/usr/local/lib/pkgconfig MANDIR=/usr/local/share/man \
	SYSCONFDIR=/etc SYSUSERSDIR=/usr/local/lib/sysusers.d \
	TMPFILESDIR=/usr/local/lib/tmpfiles.d UNITDIR=/usr/local/lib/systemd/system \
	packaging/install-next-steps >"$tmp/system-steps"
system_paths() {
	cat "$tmp/system-steps"
	grep -q "systemd-sysusers /usr/local/lib/sysusers.d/vad.conf" "$tmp/system-steps" &&
		grep -q "systemd-tmpfiles --create /usr/local/lib/tmpfiles.d/vad.conf" \
			"$tmp/system-steps" &&
		grep -q "/usr/local/sbin/vad -c /etc/vad/vad.conf --foreground" "$tmp/system-steps" &&
		grep -o '/[a-z/.-]*vad[a-z.]*' "$tmp/system-steps" | sort -u >"$tmp/printed" &&
		while read -r f; do
			[ -e "$dest$f" ] || { echo "printed, not installed: $f"; return 1; }
		done <"$tmp/printed"
}
check "for /usr/local the printed sysusers, tmpfiles, vad and config paths are installed files" \
	system_paths

# ---- uninstall ------------------------------------------------------------------------------------
# shellcheck disable=SC2086
check "make uninstall PREFIX=\$tmp/prefix removes every file install wrote" \
	sh -c "$make_cmd uninstall PREFIX='$prefix' >/dev/null && rm -f '$prefix'/var/lib/vad/stats.db* &&
	       left=\$(find '$prefix' \( -type f -o -type l \)) && echo \"left: \$left\" &&
	       [ -z \"\$left\" ]"

echo "test_install_prefix: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
