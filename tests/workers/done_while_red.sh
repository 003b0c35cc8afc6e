#!/bin/sh
# Claims DONE through `orch report` although CI is red. orch's answer goes to the worker's
# stdout too (as a shell-driven agent would show it): it must not count as a second claim.
# Records the answer and exit code, then reports BLOCKED (so the test knows every earlier
# line was read; orch stops it there).
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
commit feature.txt "broken" "a change that breaks the tests"
push_head
if ci_wait "$SHA"; then
    echo "BLOCKED: CI was expected to be red"
    exit 1
fi
rc=0
answer=$("$ORCH_BIN" report DONE --note "claiming anyway" 2>&1) || rc=$?
echo "$answer"
echo "$answer" >"$E2E_OUT/report.txt"
echo "$rc" >"$E2E_OUT/report.rc"
echo "BLOCKED: DONE was refused, a human should look"
await_release
