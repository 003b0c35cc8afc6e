#!/bin/sh
# An honest worker that does not leave when it is done: a background child that sleeps, and
# after `orch report DONE` it keeps running. Its lock must not be released while any of it
# is alive.
set -eu
. "$(dirname "$0")/lib.sh"
sleep 300 &
echo "WORKING: $ORCH_TASK"
commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
push_head
if ! ci_wait "$SHA"; then
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
"$ORCH_BIN" report DONE --note "done, but staying a while" || true
sleep 60
