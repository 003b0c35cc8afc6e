#!/bin/sh
# The board's worker (tests/integration/board.rs): one organisation with a worker in every
# state, by a word in the task. "[hang]" works until it is stopped; "[pushed]" pushes and
# waits (CI for its branch is held by the test); "[fixing]" pushes a commit CI finds red and
# is fixing it until it is stopped; "[fail]" gives up BLOCKED; "[perm]" is denied a
# permission twice (BLOCKED_PERMISSION); anything else: the happy path to DONE.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
case "$ORCH_TASK" in
*"[hang]"*)
    exec sleep 600
    ;;
*"[fail]"*)
    echo "BLOCKED: told to fail"
    exit 1
    ;;
*"[perm]"*)
    echo "Permission to use Bash has been auto-denied"
    echo "Permission to use Bash has been auto-denied"
    exec sleep 600
    ;;
*"[pushed]"*)
    commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
    push_head
    exec sleep 600
    ;;
*"[fixing]"*)
    commit broken.txt "broken by $ORCH_WORKER_ID" "a change CI finds red"
    push_head
    if ci_wait "$SHA"; then
        echo "BLOCKED: CI was expected to be red"
        exit 1
    fi
    echo "FIXING_CI: check - broken.txt must go"
    exec sleep 600
    ;;
esac
commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
push_head
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
else
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
