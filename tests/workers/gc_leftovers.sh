#!/bin/sh
# Leaves what `orch gc` must judge, chosen by the task: `done` pushes and reaches DONE;
# `unpushed` commits without pushing; `dirty` leaves an uncommitted file; `idle` changes
# nothing. All but `done` then write $E2E_OUT/ready-$ORCH_WORKER_ID and wait (to be cancelled).
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
case "$ORCH_TASK" in
done)
    commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
    push_head
    ci_wait "$SHA"
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
    exit 0
    ;;
unpushed) commit local.txt "only here" "a commit never pushed" ;;
dirty) printf 'not committed\n' > scratch.txt ;;
esac
: > "$E2E_OUT/ready-$ORCH_WORKER_ID"
await_release
