#!/bin/sh
# test_restart.sh - a restart that loses nothing, under a stand-in for systemd's fd store:
# see test_restart.py (what it checks) and fdstore_manager.py (the stand-in).
# Run by tests/run-tests with VAD_BUILD_DIR set; prints "N passed, N failed".
cd "$(dirname "$0")/../.." || exit 1
: "${VAD_BUILD_DIR:?VAD_BUILD_DIR must name the build tree (tests/run-tests sets it)}"
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 tests/integration/test_restart.py
