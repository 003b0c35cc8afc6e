#!/bin/sh
# Zero commits, claimed as work: reports the base commit as pushed (before and after pushing
# it as its own branch, through `orch report` and an output line), then claims DONE. Every
# claim must be refused. Records each answer as report-N.txt / report-N.rc.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
base=$(git rev-parse HEAD)
ask() {
    n=$1
    shift
    rc=0
    "$ORCH_BIN" report "$@" >"$E2E_OUT/report-$n.txt" 2>&1 || rc=$?
    echo "$rc" >"$E2E_OUT/report-$n.rc"
}
ask 1 PUSHED_TO_CI --sha "$base"
git push -q "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/$ORCH_BRANCH" 2>&1
ask 2 PUSHED_TO_CI --sha "$base"
echo "PUSHED_TO_CI: $ORCH_REPO commit $base"
ask 3 PUSHED_TO_CI
ask 4 DONE --note "nothing to do"
echo "BLOCKED: every claim answered"
await_release
