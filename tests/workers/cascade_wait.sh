#!/bin/sh
# Says WORKING, writes its pid to $E2E_OUT/pid-<worker id>, waits until the test releases it,
# then commits, pushes and reports DONE once CI is green.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
echo "$HOST_PID" >"$E2E_OUT/pid-$ORCH_WORKER_ID"
await_release
commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
push_head
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
else
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
