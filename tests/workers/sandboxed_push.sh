#!/bin/sh
# Pushes from inside a PID namespace of its own, as an agent's sandbox does (Codex's
# workspace-write): the local forge's hook runs in that namespace, where a runner would die
# with the sandbox. orch must start the run's runner from outside and reach DONE.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
unshare --pid --fork --mount-proc git push -q 2>&1
SHA=$(git rev-parse HEAD)
echo "PUSHED_TO_CI: $ORCH_REPO commit $SHA"
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
else
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
