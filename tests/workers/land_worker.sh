#!/bin/sh
# Landing scenarios (tests/integration/landing.rs). The task names what to do:
#   "<repo> feature"         write <repo>.txt saying so, push, wait for green, DONE
#   "... [three]"            three pushes, green each time, then DONE (after the test's release)
#   "... [exit]"             push, wait for green, end the turn (exit 0) without saying DONE
#   "... [base]"             a commit lands on the base branch (another file) while it works
#   "... [conflict]"         a commit lands on the base branch changing <repo>.txt meanwhile
#   "... [fail-once]"        the first worker on the task gives up BLOCKED; later ones work
#   "Fix <repo>: ..."        a downstream fix: also adds handles-breaking.txt (what vm's CI wants)
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
git log -1 --format=%H > "$E2E_OUT/started-at-$ORCH_WORKER_ID"

# Someone else's commit on the base branch of the forge. A worker may not push there (the
# local forge refuses it): the test's base pusher does it (tests/support/org.rs, base_pusher).
base_commit() {
    req="$E2E_OUT/base-requests/$ORCH_WORKER_ID-$$"
    printf '%s\n%s\n%s\n%s\n' "$(git remote get-url "$ORCH_PUSH_REMOTE")" "$ORCH_BASE_BRANCH" "$1" "$2" > "$req.tmp"
    mv "$req.tmp" "$req.req"
    while [ ! -e "$req.done" ]; do sleep 0.02; done
    [ "$(cat "$req.done")" = ok ]
}

case "$ORCH_TASK" in
*"[fail-once]"*)
    if [ ! -e "$E2E_OUT/failed-once" ]; then
        : > "$E2E_OUT/failed-once"
        echo "BLOCKED: told to fail once"
        exit 1
    fi
    ;;
esac

case "$ORCH_TASK" in
"Fix "*) printf 'yes\n' > handles-breaking.txt && git add handles-breaking.txt ;;
esac

case "$ORCH_TASK" in
*"[base]"*) base_commit other.txt "someone else's change" ;;
*"[conflict]"*)
    # Once per test: a replacement redoing the task finds the base as it is.
    if [ ! -e "$E2E_OUT/conflicted-$ORCH_REPO" ]; then
        : > "$E2E_OUT/conflicted-$ORCH_REPO"
        base_commit "$ORCH_REPO.txt" "someone else's version"
    fi
    ;;
esac

# `land: direct`: the worker's branch on the forge is the base branch itself; a plain `git push`
# from orch/<id> would not go there.
push_it() {
    case "$ORCH_BRANCH" in
    orch/*) push_head ;;
    *)
        git push -q "$ORCH_PUSH_REMOTE" "HEAD:$ORCH_BRANCH" 2>&1
        SHA=$(git rev-parse HEAD)
        echo "PUSHED_TO_CI: $ORCH_REPO commit $SHA"
        ;;
    esac
}

# A replacement (after a kill) finds the previous life's commit: the same content commits empty.
# A fix leaves <repo>.txt (what the repositories above read) as it is.
file="$ORCH_REPO.txt"
case "$ORCH_TASK" in "Fix "*) file=fix.txt ;; esac
step() {
    printf '%s\n' "$1" > "$file"
    git add "$file"
    git commit -q --allow-empty -m "$1"
    push_it
    if ! ci_wait "$SHA"; then
        echo "BLOCKED: CI for $SHA is not green"
        exit 1
    fi
    echo "$SHA" >> "$E2E_OUT/green-$ORCH_WORKER_ID"
}

case "$ORCH_TASK" in
*"[three]"*)
    step "$ORCH_TASK: step 1"
    step "$ORCH_TASK: step 2"
    step "$ORCH_TASK: step 3"
    await_release
    echo "DONE: three steps, all green"
    ;;
*"[exit]"*)
    step "$ORCH_TASK"
    exit 0
    ;;
*)
    step "$ORCH_TASK"
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
    ;;
esac
