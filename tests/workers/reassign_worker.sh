#!/bin/sh
# Reassignment: saves its prompt (stdin) as $E2E_OUT/prompt-$ORCH_WORKER_ID.txt. A worker told
# it takes a task over (REASSIGNED), or whose task says neither "[stall]" nor "[stall-fixing]",
# does the happy path; the first worker of a "[stall]" task commits a start, then goes quiet
# (no output, nothing pushed) until its WORKING timeout ends it; the first of a
# "[stall-fixing]" task pushes a start (no feature.txt), reports PUSHED_TO_CI and at once
# FIXING_CI (before CI has decided), then goes quiet until its FIXING_CI timeout ends it.
set -eu
. "$(dirname "$0")/lib.sh"
cat >"$E2E_OUT/prompt-$ORCH_WORKER_ID.txt"
case "$ORCH_TASK" in
*"[stall-fixing]"*)
    if ! grep -q "^REASSIGNED" "$E2E_OUT/prompt-$ORCH_WORKER_ID.txt"; then
        echo "WORKING: $ORCH_TASK"
        commit stall.txt "started by $ORCH_WORKER_ID" "start the feature"
        push_head
        echo "$SHA" >"$E2E_OUT/stalled-$ORCH_WORKER_ID"
        echo "FIXING_CI: check - feature.txt is still missing"
        sleep 600
        exit 1
    fi
    ;;
*"[stall]"*)
    if ! grep -q "^REASSIGNED" "$E2E_OUT/prompt-$ORCH_WORKER_ID.txt"; then
        echo "WORKING: $ORCH_TASK"
        commit stall.txt "started by $ORCH_WORKER_ID" "start the feature"
        sleep 600
        exit 1
    fi
    ;;
esac
exec "$(dirname "$0")/happy.sh" </dev/null
