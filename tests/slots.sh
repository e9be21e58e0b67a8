# shellcheck shell=bash
# slots.sh - test slots shared by every test run of one `make check` (sourced by
# tests/run-tests and tests/run-check). $VAD_TEST_SLOTS names a directory of slot.* files;
# holding a lock on one of them is holding a slot, so no more test programs run at once
# over all modes than the directory has files.

# take_slot: when $VAD_TEST_SLOTS is set, wait until one of its slots can be locked; the
# lock stays with fd 9 of the calling shell until it ends. Give what runs a test `9>&-`, so
# that a process it leaves behind cannot keep the slot.
take_slot() {
	local f
	[ -n "${VAD_TEST_SLOTS:-}" ] || return 0
	while :; do
		for f in "$VAD_TEST_SLOTS"/slot.*; do
			exec 9>>"$f" || continue
			flock -n 9 && return 0
			exec 9>&-
		done
		sleep 0.2
	done
}

# take_all_slots: wait for every slot (in name order, as every such waiter does, so two never
# deadlock), each on an fd of the calling shell appended to slot_fds; close them for the test.
slot_fds=()
take_all_slots() {
	local f fd
	[ -n "${VAD_TEST_SLOTS:-}" ] || return 0
	for f in "$VAD_TEST_SLOTS"/slot.*; do
		exec {fd}>>"$f" && flock "$fd" && slot_fds+=("$fd")
	done
}
