#!/bin/sh
# Two workers of an account of their own, one after the other (issue 34: workers must not read
# each other through orch). On beta: the happy path; its pushed commit goes to
# $E2E_OUT/beta-sha. On alpha: asks its supervisor for the CI log of beta's commit — as beta's
# and as its own repository's — then does its own work. Attempts go to $E2E_OUT/<name>.code/.out.
. "$(dirname "$0")/lib.sh"
cat >/dev/null
echo "WORKING: $ORCH_TASK"
if [ "$ORCH_REPO" = alpha ]; then
    other=$(cat "$E2E_OUT/beta-sha")
    attempt snoop-other-repo orch ci logs --repo beta --sha "$other" --job test
    attempt snoop-as-own-repo orch ci logs --repo alpha --sha "$other" --job test
fi
commit work.txt "done by $ORCH_WORKER_ID" "work"
push_head
if ! ci_wait "$SHA"; then
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
attempt own-logs orch ci logs --repo "$ORCH_REPO" --sha "$SHA" --job test
[ "$ORCH_REPO" = beta ] && echo "$SHA" >"$E2E_OUT/beta-sha"
echo "DONE: $ORCH_REPO $SHA"
