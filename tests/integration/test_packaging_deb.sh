#!/bin/sh
# test_packaging_deb.sh - the Debian packages, end to end (VAD_TEST_MODE=normal only: it
# rebuilds the whole tree and runs lintian, which is slow):
#   - debhelper, lintian and fakeroot are installed (with apt-get when missing);
#   - packaging/build-deb (dpkg-buildpackage -us -uc -b) builds vad, libvad0, libvad-dev and
#     python3-vad;
#   - lintian reports no errors (warnings and info are printed);
#   - dpkg -i installs them: the postinst creates the vad user and its directories, the
#     binaries and units work in place, /etc/vad/vad.conf is a conffile, a program builds
#     with pkg-config against libvad-dev and talks to the packaged daemon, and so does
#     Debian's python3 through python3-vad;
#   - dpkg -P removes every file again (only when the packages were not installed before).
# Run by tests/run-tests with VAD_BUILD_DIR set; prints "N passed, N failed".
set -u

cd "$(dirname "$0")/../.." || exit 1
mode=${VAD_TEST_MODE:-normal}
if [ "$mode" != normal ]; then
	echo "SKIP: the Debian package checks run in VAD_TEST_MODE=normal only (this is $mode)"
	echo "test_packaging_deb: 0 passed, 0 failed"
	exit 0
fi

installed_debs=""
checks_cleanup_more() {
	if [ -n "$installed_debs" ]; then
		# shellcheck disable=SC2086
		dpkg -P $installed_debs >/dev/null 2>&1
	fi
}
# shellcheck source=tests/integration/checks.sh
. tests/integration/checks.sh
checks_begin vad-deb-test

version=$(sed -n 's/^#define VAD_VERSION_STRING "\(.*\)"/\1/p' client/vad.h)
cc_flags="-std=gnu11 -Wall -Wextra -Werror"

deb_tools_ready() {
	command -v dpkg-buildpackage >/dev/null 2>&1 && command -v dh >/dev/null 2>&1 &&
		command -v lintian >/dev/null 2>&1 && command -v fakeroot >/dev/null 2>&1
}
install_deb_tools() {
	deb_tools_ready && return 0
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
		debhelper lintian fakeroot ||
		{ $sudo apt-get update -qq &&
		  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
			--no-install-recommends debhelper lintian fakeroot; }
}
purge_packages() { # purge_packages FILELIST: dpkg -P, then no file of FILELIST may remain
	dpkg -P python3-vad libvad-dev vad libvad0 || return 1
	for p in python3-vad libvad-dev vad libvad0; do
		if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'installed'; then
			echo "still installed: $p"
			return 1
		fi
	done
	left=0
	while read -r f; do
		if [ ! -d "$f" ] && { [ -e "$f" ] || [ -L "$f" ]; }; then
			echo "left behind: $f"
			left=1
		fi
	done <"$1"
	[ "$left" -eq 0 ] && [ ! -e /etc/vad ] && [ ! -e /var/lib/vad ]
}
# wait_for_socket PATH PID: until a client connects on PATH, or PID dies (bounded).
wait_for_socket() {
	i=0
	while [ $i -lt 300 ]; do
		kill -0 "$2" 2>/dev/null || return 1
		[ -S "$1" ] && vactl --socket "$1" status >/dev/null 2>&1 && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# The packaged daemon on a private socket, and a program built against libvad-dev.
packaged_daemon_serves() {
	cat >"$tmp/vad.conf" <<-EOF
	[vad]
	socket = $tmp/vad.sock
	[arena default]
	size = 64M
	EOF
	env -u NOTIFY_SOCKET -u LISTEN_FDS -u LISTEN_PID -u VAD_SOCKET \
		/usr/sbin/vad -c "$tmp/vad.conf" --foreground >"$tmp/vad.log" 2>&1 &
	daemon_pid=$!
	ok=0
	if wait_for_socket "$tmp/vad.sock" "$daemon_pid" &&
		"$tmp/client-deb" "$tmp/vad.sock" && python_client_serves "$tmp/vad.sock"; then
		ok=1
	fi
	kill -TERM "$daemon_pid" 2>/dev/null
	wait "$daemon_pid" || ok=0
	daemon_pid=""
	[ "$ok" -eq 1 ] || cat "$tmp/vad.log"
	[ "$ok" -eq 1 ]
}

# python_client_serves SOCKET: Debian's python3, outside the tree, imports the packaged module
# (not the build's) and allocates, writes through a memoryview, reads it back and frees.
python_client_serves() {
	(cd / && /usr/bin/python3 - "$1") <<-'EOF'
	import sys, vad
	assert vad.__file__.startswith("/usr/lib/python3/dist-packages/"), vad.__file__
	with vad.Client(socket=sys.argv[1]) as c:
	    r = c.alloc(8192)
	    memoryview(r)[:5] = b"hello"
	    assert bytes(memoryview(r)[:5]) == b"hello"
	    r.free()
	EOF
}

check "debhelper, lintian and fakeroot are installed (apt-get when missing)" install_deb_tools
debs=$tmp/deb
# No -dbgsym packages: they double the packaging and lintian time and are not shipped here.
check "dpkg-buildpackage -us -uc -b builds vad, libvad0, libvad-dev and python3-vad" \
	env DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-} noautodbgsym" sh -c "packaging/build-deb \
	'$debs' && ls '$debs'/vad_${version}_*.deb '$debs'/libvad0_${version}_*.deb \
	'$debs'/libvad-dev_${version}_*.deb '$debs'/python3-vad_${version}_*.deb"
if ! ls "$debs"/*.changes >/dev/null 2>&1; then
	: >"$tmp/out"
	fail "lintian: no .changes file to check"
	echo "test_packaging_deb: $passed passed, $failed failed"
	exit 1
fi

t0=$(date +%s)
lintian -I --fail-on error --tag-display-limit 0 "$debs"/*.changes >"$tmp/lintian" 2>&1
lintian_rc=$?
echo "lintian: $(grep -c '^E:' "$tmp/lintian") errors, $(grep -c '^W:' "$tmp/lintian")" \
	"warnings, $(grep -c '^I:' "$tmp/lintian") info"
grep '^[EWI]:' "$tmp/lintian" | sed 's/^/    /'
cp "$tmp/lintian" "$tmp/out"
if [ "$lintian_rc" -eq 0 ] && ! grep -q '^E:' "$tmp/lintian"; then
	pass "lintian: no errors ($(($(date +%s) - t0))s)"
else
	fail "lintian: no errors ($(($(date +%s) - t0))s)"
fi

was_installed=""
for p in vad libvad0 libvad-dev python3-vad; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		was_installed="$was_installed $p"
	fi
done
# shellcheck disable=SC2086
if dpkg -i "$debs"/vad_${version}_*.deb "$debs"/libvad0_${version}_*.deb \
	"$debs"/libvad-dev_${version}_*.deb "$debs"/python3-vad_${version}_*.deb >"$tmp/out" 2>&1; then
	pass "dpkg -i installs the four packages"
	# Packages that were not there before the test are purged at the end.
	[ -z "$was_installed" ] && installed_debs="python3-vad libvad-dev vad libvad0"
	# The user stays after a purge (policy), the directories do not: check both.
	check "postinst created user vad, /var/lib/vad and /run/vad owned by vad" \
		sh -c "id vad && [ \"\$(stat -c %U /var/lib/vad)\" = vad ] &&
		       [ \"\$(stat -c %U /run/vad)\" = vad ]"
	check "packaged vad and vactl run" \
		sh -c "/usr/sbin/vad --version | grep -qx 'vad $version' && vactl --version"
	check "packaged units verify in place (man pages included)" \
		systemd-analyze verify /lib/systemd/system/vad.socket /lib/systemd/system/vad.service
	check "/etc/vad/vad.conf is a conffile of vad" \
		sh -c "dpkg-query -W -f='\${Conffiles}' vad | grep -q '/etc/vad/vad.conf'"
	check "a program builds with pkg-config against the packaged libvad-dev" \
		sh -c "cc $cc_flags -o '$tmp/client-deb' tests/integration/pkg_client.c \
		       \$(pkg-config --cflags --libs libvad) &&
		       '$tmp/client-deb' --version | grep -q '^$version '"
	check "that program and python3-vad allocate from the packaged daemon" packaged_daemon_serves
	if [ -z "$was_installed" ]; then
		dpkg -L vad libvad0 libvad-dev python3-vad >"$tmp/pkgfiles" 2>/dev/null
		installed_debs=""
		check "dpkg -P purges them and leaves none of their files" \
			purge_packages "$tmp/pkgfiles"
	else
		echo "SKIP: purge ($was_installed were installed before this test; left installed)"
	fi
else
	fail "dpkg -i installs the four packages"
fi

echo "test_packaging_deb: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
