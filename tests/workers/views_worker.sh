#!/bin/sh
# The JSON views' worker: the happy path (edit, commit, push, wait for green, DONE), unless
# its task says "[fail]" (it gives up BLOCKED) or "[hang]" (it works until it is stopped).
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
case "$ORCH_TASK" in
*"[fail]"*)
    echo "BLOCKED: told to fail"
    exit 1
    ;;
*"[hang]"*)
    sleep 600
    exit 0
    ;;
esac
commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
push_head
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
else
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
