#!/bin/sh
# For `orch logs`: a line with a terminal escape, a push, then waits for the test (which sees
# PUSHED_TO_CI recorded first) before printing "line B" and finishing.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
printf 'line A \033[31mred\n'
commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
push_head
await_release
echo "line B after release"
ci_wait "$SHA"
echo "DONE: $ORCH_REPO all green, radicle-push: success"
