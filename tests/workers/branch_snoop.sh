#!/bin/sh
# Workers of an account of their own, one after the other on one repository (issue 34: workers
# do not read each other through orch). The first ("first" in its task) pushes and leaves its
# id in $E2E_OUT/first-id; the next lists the remote's branches through its relay before and
# after its own push, and tries to fetch the first one's branch by name. Attempts go to
# $E2E_OUT/<name>.code/.out.
. "$(dirname "$0")/lib.sh"
cat >/dev/null
echo "WORKING: $ORCH_TASK"
remote=$(git config "branch.$(git branch --show-current).remote")
case "$ORCH_TASK" in
first*)
    commit first.txt "by $ORCH_WORKER_ID" "first"
    push_head
    echo "$ORCH_WORKER_ID" >"$E2E_OUT/first-id"
    ;;
*)
    attempt listed-before git ls-remote "$remote"
    attempt fetch-other git fetch "$remote" "refs/heads/orch/$(cat "$E2E_OUT/first-id")"
    commit second.txt "by $ORCH_WORKER_ID" "second"
    push_head
    attempt listed-after git ls-remote "$remote"
    ;;
esac
if ! ci_wait "$SHA"; then
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
echo "DONE: $ORCH_REPO $SHA"
