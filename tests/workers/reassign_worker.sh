#!/bin/sh
# Reassignment: saves its prompt (stdin) as $E2E_OUT/prompt-$ORCH_WORKER_ID.txt. A worker told
# it takes a task over (REASSIGNED), or whose task does not say "[stall]", does the happy path;
# the first worker of a "[stall]" task commits a start, then goes quiet (no output, nothing
# pushed) until its WORKING timeout ends it.
set -eu
. "$(dirname "$0")/lib.sh"
cat >"$E2E_OUT/prompt-$ORCH_WORKER_ID.txt"
case "$ORCH_TASK" in
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
