#!/bin/sh
# Happy path: edit, commit, push, PUSHED_TO_CI, wait for green, DONE.
set -eu
. "$(dirname "$0")/lib.sh"
dump_env
echo "WORKING: $ORCH_TASK"
commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
push_head
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
else
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
