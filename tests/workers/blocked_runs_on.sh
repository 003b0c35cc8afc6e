#!/bin/sh
# Reports BLOCKED, then runs on as if nobody heard it: a child in the background, and 2 s later
# a marker ($E2E_OUT/ran-on-$ORCH_WORKER_ID) and a push. A task with "slow" works 3 s before it
# reports. Once the test grants it ($E2E_OUT/granted-$ORCH_WORKER_ID, a respawned life): the
# happy path, or — a task with "hang" — works on without end.
set -eu
. "$(dirname "$0")/lib.sh"
if [ ! -e "$E2E_OUT/granted-$ORCH_WORKER_ID" ]; then
    echo "WORKING: $ORCH_TASK"
    commit feature.txt "half done" "half of the feature"
    sleep 120 &
    case "$ORCH_TASK" in *slow*) sleep 3 ;; esac
    orch report BLOCKED --note "missing credentials" >/dev/null 2>&1 || true
    sleep 2
    : >"$E2E_OUT/ran-on-$ORCH_WORKER_ID"
    push_head
    wait
    exit 0
fi
case "$ORCH_TASK" in
*hang*)
    echo "WORKING: going on"
    exec sleep 600
    ;;
esac
exec "$(dirname "$0")/happy.sh"
