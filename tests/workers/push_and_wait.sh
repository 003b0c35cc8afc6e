#!/bin/sh
# Pushes one commit, reports it and then waits (for the test's release) without pushing again:
# its supervisor follows a commit whose CI stays pending.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
commit feature.txt "a feature" "add a feature"
push_head
await_release
