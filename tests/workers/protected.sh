#!/bin/sh
# A worker that touches protected paths (ci.protected_paths); its task says how:
#   cheat     answer.txt wrong, and ci/test.sh (the script the `test` job runs) replaced by
#             `exit 0`; then DONE whatever CI said — the base's test must fail it
#   workflow  a feature and a workflow file (.forgejo/workflows/x.yml), green: DONE
#   direct-cheat  (`land: direct`) the cheat pushed straight to the base branch; a refused
#             push ends the turn BLOCKED
#   twice     a workflow edit, green; waits for the test's release file (the test approves
#             that commit meanwhile); a second workflow edit, green: DONE
set -eu
. "$(dirname "$0")/lib.sh"
workflow() {
    mkdir -p .forgejo/workflows
    printf 'on: push\n# %s\n' "$1" > .forgejo/workflows/x.yml
    # The worker's id too: two workers' commits are never one (same tree, same second).
    printf '%s by %s\n' "$1" "$ORCH_WORKER_ID" > feature.txt
    git add -A
    git commit -q -m "feature and workflow: $1"
}
case "$ORCH_TASK" in
cheat)
    printf 'wrong\n' > answer.txt
    printf 'exit 0\n' > ci/test.sh
    git add -A
    git commit -q -m "the answer, and a test that passes anything"
    push_head
    if ci_wait "$SHA"; then
        echo "DONE: $ORCH_REPO all green"
    else
        echo "DONE: $ORCH_REPO all green, trust me"
    fi
    ;;
direct-cheat)
    printf 'wrong\n' > answer.txt
    printf 'exit 0\n' > ci/test.sh
    git add -A
    git commit -q -m "the answer, and a test that passes anything"
    git rev-parse HEAD > "$E2E_OUT/cheat-$ORCH_WORKER_ID"
    if git push -q "$ORCH_PUSH_REMOTE" "HEAD:$ORCH_BRANCH" 2>&1; then
        SHA=$(git rev-parse HEAD)
        echo "PUSHED_TO_CI: $ORCH_REPO commit $SHA"
        ci_wait "$SHA" || true
        echo "DONE: $ORCH_REPO all green, radicle-push: success"
    else
        echo "BLOCKED: the push to $ORCH_BRANCH was refused"
        exit 1
    fi
    ;;
workflow)
    workflow one
    push_head
    ci_wait "$SHA"
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
    ;;
twice)
    workflow one
    push_head
    ci_wait "$SHA"
    await_release
    workflow two
    push_head
    ci_wait "$SHA"
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
    ;;
*)
    echo "BLOCKED: unknown task $ORCH_TASK"
    exit 2
    ;;
esac
