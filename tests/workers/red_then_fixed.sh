#!/bin/sh
# CI red on the first push (job `test` wants a file named `fixed`), then fixed.
set -eu
. "$(dirname "$0")/lib.sh"
dump_env
echo "WORKING: $ORCH_TASK"
commit feature.txt "first try" "feature, first try"
push_head
if ci_wait "$SHA"; then
    echo "BLOCKED: the first push was expected to be red"
    exit 1
fi
echo "FIXING_CI: test - the file named fixed is missing"
commit fixed "yes" "add the file the test wants"
push_head
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
else
    echo "BLOCKED: still red after the fix"
    exit 1
fi
