#!/bin/sh
# Lies by omission: pushes a green commit and reports it, waits for green CI, then pushes a
# commit that breaks the tests WITHOUT reporting it, and claims DONE. The DONE must not stand:
# the head of its branch is red. Records orch's answer and waits for the test.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
commit fixed "green" "a change CI likes"
push_head
if ! ci_wait "$SHA"; then
    echo "BLOCKED: CI was expected to be green"
    exit 1
fi
git rm -q fixed
git commit -q -m "a change that breaks the tests"
git push -q 2>&1
git rev-parse HEAD >"$E2E_OUT/red-$ORCH_WORKER_ID"
rc=0
"$ORCH_BIN" report DONE --note "all green" >"$E2E_OUT/report.txt" 2>&1 || rc=$?
echo "$rc" >"$E2E_OUT/report.rc"
await_release
