#!/bin/sh
# A fix that never comes: pushes a change CI finds red (job `test` wants a file named `fixed`),
# reports FIXING_CI, then works on in silence (no output, no push) until orch stops it: each of
# its fix attempts runs out of time.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
commit feature.txt "broken" "a change that breaks the tests"
push_head
if ci_wait "$SHA"; then
    echo "BLOCKED: CI was expected to be red"
    exit 1
fi
echo "FIXING_CI: test - the file named fixed is missing"
exec sleep 600
