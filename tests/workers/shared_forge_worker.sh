#!/bin/sh
# A sandboxed worker of an organisation whose local forge is shared (`forge.path`, inside the
# organisation's directory): it looks for the forge ($E2E_OUT/forge-path), then pushes its work
# and waits for CI, which writes in its checkout under that forge.
. "$(dirname "$0")/lib.sh"
cat >/dev/null
echo "WORKING: $ORCH_TASK"
attempt read-shared-forge ls -A "$(cat "$E2E_OUT/forge-path")"
commit work.txt "done by $ORCH_WORKER_ID" "work"
git push -q 2>&1
SHA=$(git rev-parse HEAD)
echo "PUSHED_TO_CI: $ORCH_REPO commit $SHA"
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO $SHA"
else
    echo "BLOCKED: CI for $SHA is not green"
fi
