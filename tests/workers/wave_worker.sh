#!/bin/sh
# Wave worker: the happy path (edit, commit, push, wait for green, DONE), unless its task
# says "[fail]": then it gives up BLOCKED (its chain lock stays held, as for any BLOCKED).
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
case "$ORCH_TASK" in
*"[fail]"*)
    echo "BLOCKED: told to fail"
    exit 1
    ;;
esac
# A replacement (its predecessor's node died) finds the work committed and pushed: it goes on
# from there.
if [ "$(cat feature.txt 2>/dev/null)" != "feature by $ORCH_WORKER_ID" ]; then
    commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
fi
push_head
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
else
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
