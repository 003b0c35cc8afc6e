#!/bin/sh
# A worker that accounts for its work: decisions as it goes (one said twice), then DONE with a
# one-line summary of its change (see the CI guide).
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
commit retry.py "def retry(): pass" "add a retry"
echo "DECISION: retry three times with backoff, as the API advises"
commit test_retry.py "def test_retry(): pass" "test the retry"
echo "DECISION: retry three times with backoff, as the API advises"
push_head
echo "DECISION: no new dependency"
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success — added a retry to the client"
else
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
