#!/bin/sh
# Two roles, by task. "honest": the happy path. Otherwise: claims the commit another worker
# pushed ($E2E_OUT/other-sha) — first as it is, then after pushing it as its own branch — and
# claims DONE. Every claim must be refused. Records each answer as report-N.txt / .rc.
set -eu
. "$(dirname "$0")/lib.sh"
case "$ORCH_TASK" in
honest*)
    exec "$(dirname "$0")/happy.sh"
    ;;
esac
echo "WORKING: $ORCH_TASK"
other=$(cat "$E2E_OUT/other-sha")
git fetch -q "$ORCH_PUSH_REMOTE"
ask() {
    n=$1
    shift
    rc=0
    "$ORCH_BIN" report "$@" >"$E2E_OUT/report-$n.txt" 2>&1 || rc=$?
    echo "$rc" >"$E2E_OUT/report-$n.rc"
}
ask 1 PUSHED_TO_CI --sha "$other"
git push -q "$ORCH_PUSH_REMOTE" "$other:refs/heads/$ORCH_BRANCH" 2>&1
ask 2 PUSHED_TO_CI --sha "$other"
ask 3 DONE --note "someone else's work"
echo "BLOCKED: every claim answered"
await_release
