#!/bin/sh
# Claims PUSHED_TO_CI for a commit that exists only locally (output line), then for a SHA that
# exists nowhere (orch report), records what orch answered, and waits for the test.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
commit feature.txt "never pushed" "a local commit"
echo "PUSHED_TO_CI: $ORCH_REPO commit $(git rev-parse HEAD)"
rc=0
"$ORCH_BIN" report PUSHED_TO_CI --sha 0123456789abcdef0123456789abcdef01234567 >"$E2E_OUT/report.txt" 2>&1 || rc=$?
echo "$rc" >"$E2E_OUT/report.rc"
await_release
