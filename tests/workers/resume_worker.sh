#!/bin/sh
# Scripted worker for tests/integration/resume.rs (driven through tests/support/org.rs).
#
# $1 is a control directory outside orch's state directory. Each start ("life") of a worker
# appends its pid to lives/<worker id>, saves its prompt (stdin) as prompts/<worker id>.<life>
# and drops marks/<worker id>.<life>.<point> when it reaches a point the test waits for.
#
# The first word of the task picks what a first life does. A replacement (its prompt says
# "RESUMING as replacement worker") always does the whole job, except in mode `die`.
#   die            exit 1 at once, in every life, saying which life (so each end differs: the
#                  same quick end twice would be a setup failure, not respawned again)
#   hang           commit locally (unpushed), report WORKING, mark `hanging`, wait to be killed
#   push-hang      commit a good change, push, report PUSHED_TO_CI, mark `pushed`, wait
#   bad-push-hang  the same with a change CI rejects
#   fix-hang       push a change CI rejects, wait for the red verdict, report FIXING_CI,
#                  mark `fixing`, wait
#   blocked        report BLOCKED and exit 0
#   push-crash     push a good change, report PUSHED_TO_CI, mark `pushed`, exit 1 (a crash
#                  before CI decided: no DONE, no end of turn)
#   green-crash    push a good change, report PUSHED_TO_CI on its output, wait until CI is
#                  green, mark `green`, exit 1 (a crash after a green push)
#   lock-hang      commit locally, then leave the lock files of a git killed mid-commit and
#                  mid-push (index.lock, HEAD.lock, the branch's ref lock in the clone and in
#                  the remote), mark `hanging`, wait
#   fetch-lock     first leave the lock a `git fetch` killed half-way leaves on this branch's
#                  remote-tracking ref (a minute old), then the whole job
#   nohook-push-hang  push a good change without its post-receive hook running (as when a
#                  worker dies inside `git push`: no CI run, ever), mark `pushed`, wait
#   (other)        the whole job: commit, push, PUSHED_TO_CI, wait for CI, fix while red, DONE
# CI (see Ci::Gated in tests/support/org.rs) passes when status.txt says `good`.
. "$(dirname "$0")/chaos_lib.sh"

mode=${ORCH_TASK%% *}
if [ "$mode" != die ] && grep -q "RESUMING as replacement worker" "$prompt"; then
  mode=full
fi

mark() { : > "$ctl/marks/$ORCH_WORKER_ID.$life.$1"; }
wait_to_be_killed() { while :; do sleep 1; done; }

case "$mode" in
  die)
    echo "life $life: dying"
    exit 1 ;;
  hang)
    change wip
    orch report WORKING --note "life $life: work in progress" >/dev/null
    mark hanging
    wait_to_be_killed ;;
  push-hang|bad-push-hang)
    if [ "$mode" = push-hang ]; then change good; else change bad; fi
    push
    orch report PUSHED_TO_CI --sha "$sha" >/dev/null
    mark pushed
    wait_to_be_killed ;;
  fix-hang)
    change bad
    push
    orch report PUSHED_TO_CI --sha "$sha" >/dev/null
    orch ci status --repo "$ORCH_REPO" --sha "$sha" --wait --timeout 120s >/dev/null 2>&1
    orch report FIXING_CI --job check --note "status.txt says bad" >/dev/null
    mark fixing
    wait_to_be_killed ;;
  lock-hang)
    change wip
    gitdir=$(git rev-parse --absolute-git-dir)
    common=$(cd "$(git rev-parse --git-common-dir)" && pwd)
    remote=$(git remote get-url "$ORCH_PUSH_REMOTE")
    : > "$gitdir/index.lock"
    : > "$gitdir/HEAD.lock"
    mkdir -p "$(dirname "$common/refs/heads/$ORCH_BRANCH")" "$(dirname "$remote/refs/heads/$ORCH_BRANCH")"
    : > "$common/refs/heads/$ORCH_BRANCH.lock"
    : > "$remote/refs/heads/$ORCH_BRANCH.lock"
    mark hanging
    wait_to_be_killed ;;
  fetch-lock)
    common=$(cd "$(git rev-parse --git-common-dir)" && pwd)
    lock="$common/refs/remotes/$ORCH_PUSH_REMOTE/$ORCH_BRANCH.lock"
    mkdir -p "$(dirname "$lock")"
    : > "$lock"
    touch -d '1 minute ago' "$lock" ;;
  nohook-push-hang)
    change good
    git push -q --receive-pack="git -c core.hooksPath=/dev/null receive-pack" \
      "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/$ORCH_BRANCH"
    mark pushed
    wait_to_be_killed ;;
  blocked)
    orch report BLOCKED --note "needs a human" >/dev/null
    mark blocked
    exit 0 ;;
  push-crash)
    change good
    push
    orch report PUSHED_TO_CI --sha "$sha" >/dev/null
    mark pushed
    exit 1 ;;
  green-crash)
    change good
    push
    echo "PUSHED_TO_CI: $ORCH_REPO commit $sha"
    orch ci status --repo "$ORCH_REPO" --sha "$sha" --wait --timeout 120s >/dev/null 2>&1
    mark green
    exit 1 ;;
esac

change good
push
orch report PUSHED_TO_CI --sha "$sha" >/dev/null
attempt=0
while ! orch ci status --repo "$ORCH_REPO" --sha "$sha" --wait --timeout 120s >/dev/null 2>&1; do
  attempt=$((attempt + 1))
  if [ "$attempt" -gt 5 ]; then
    orch report BLOCKED --note "CI keeps failing" >/dev/null
    exit 1
  fi
  orch report FIXING_CI --job check --note "status.txt must say good" >/dev/null
  change good
  push
  orch report PUSHED_TO_CI --sha "$sha" >/dev/null
done
mark done
orch report DONE --note "$ORCH_REPO all green, radicle-push: success" >/dev/null
exit 0
