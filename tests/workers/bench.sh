#!/bin/sh
# Benchmark worker (benches/supervisors.rs): a few WORKING lines over ~10 s, a commit, a
# push, waits for green, DONE.
set -eu
. "$(dirname "$0")/lib.sh"
for step in 1 2 3 4 5; do
    echo "WORKING: step $step of 5 of $ORCH_TASK"
    sleep 2
done
commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
push_head
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
else
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
