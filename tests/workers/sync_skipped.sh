#!/bin/sh
# The sync job is skipped on the first push (sync_not_done): an early DONE must be refused;
# an empty commit triggers a push run in which it succeeds.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
commit feature.txt "feature" "add feature"
push_head
FIRST=$SHA
if ci_wait "$FIRST"; then
    echo "BLOCKED: the first push was expected to be sync_not_done"
    exit 1
fi
if "$ORCH_BIN" report DONE --note "early, radicle-push was skipped" >"$E2E_OUT/early-done.txt"; then
    echo "BLOCKED: an early DONE was accepted"
    exit 1
fi
git commit -q --allow-empty -m 'ci: trigger radicle sync'
push_head
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
else
    echo "BLOCKED: the sync push is not green"
    exit 1
fi
