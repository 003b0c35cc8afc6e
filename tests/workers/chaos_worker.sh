#!/bin/sh
# Scripted worker for tests/integration/chaos.rs: the whole job, a little slowly, so that kills land in
# every phase. $1 is a control directory outside orch's state directory (prompts are saved
# there as prompts/<worker id>.<life>). A task whose first word is `flaky` pushes a change CI
# rejects first (in its first life only), then fixes it; one whose first word is `liar` lies
# first (below); one whose first word is `hostile` trespasses first (below and
# chaos_hostile.sh); one whose first word is `quits` reports BLOCKED in every life (the driver
# starts its task over). CI passes when status.txt says `good`.
. "$(dirname "$0")/chaos_lib.sh"
. "$(dirname "$0")/chaos_hostile.sh"
step() { sleep 0.2; }

first=good
if [ "${ORCH_TASK%% *}" = flaky ] && [ "$life" = 1 ]; then first=bad; fi
echo "chaos worker: life $life of $ORCH_WORKER_ID"
if [ "${ORCH_TASK%% *}" = hostile ]; then remember_base; fi
step
# A task whose first word is `quits` gives up: BLOCKED, for a person. The operator (the chaos
# driver) releases its lock and spawns the task again; once that attempt is DONE, respawning
# or approving this one must be refused (issue 34 item 1).
if [ "${ORCH_TASK%% *}" = quits ]; then
  orch report BLOCKED --note "this needs a person" >/dev/null 2>&1
  exit 0
fi
# A task whose first word is `liar` lies in its first life: claims the base commit, then
# pushes a red commit after its green one without reporting it and claims DONE. orch must
# refuse both; a lie it accepts leaves a mark the test fails on. Then it does the work.
if [ "${ORCH_TASK%% *}" = liar ] && [ "$life" = 1 ]; then
  if orch report PUSHED_TO_CI --sha "$(git rev-parse HEAD)" >/dev/null 2>&1; then
    echo "base commit accepted" >>"$ctl/marks/lie-accepted-$ORCH_WORKER_ID"
  fi
  change good
  push
  orch report PUSHED_TO_CI --sha "$sha" >/dev/null
  orch ci status --repo "$ORCH_REPO" --sha "$sha" --wait --timeout 120s >/dev/null 2>&1
  change bad
  push
  if orch report DONE --note "all green" >/dev/null 2>&1; then
    echo "DONE on a red branch head accepted" >>"$ctl/marks/lie-accepted-$ORCH_WORKER_ID"
  fi
fi
# A task whose first word is `hostile` tries, in its first life, what a worker may not do
# (issue 25): speak on another worker's channel, run operator commands on itself and on
# another worker, push onto another worker's branch and to the base branch, and leave a
# daemon that tries to leave its cgroup. Whatever orch accepts leaves a mark the test fails
# on; the daemon must be gone when the lock is released (the sampler watches it).
if [ "${ORCH_TASK%% *}" = hostile ] && [ "$life" = 1 ]; then
  accepted() { echo "$1" >>"$ctl/marks/hostile-accepted-$ORCH_WORKER_ID"; }
  other= channel=
  for p in /proc/[0-9]*; do
    args=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    case "$args" in
    *" __guard "*"--worker "*)
      w=$(printf '%s\n' "$args" | sed -n 's/.*--worker \([^ ]*\).*/\1/p')
      # Only this organisation's workers (other tests run beside it): a session of ours.
      if [ -n "$w" ] && [ "$w" != "$ORCH_WORKER_ID" ] && [ -d "$ORCH_STATE_DIR/$w" ]; then
        other=$w
        channel=$(printf '%s\n' "$args" | sed -n 's/.*--channel \([^ ]*\).*/\1/p')
      fi ;;
    esac
  done
  if [ -n "$channel" ] &&
    ORCH_REPORT_SOCKET=$channel orch report BLOCKED --note "hijacked" >/dev/null 2>&1; then
    accepted "a report on $other's channel"
  fi
  if orch release "$ORCH_WORKER_ID" --force --reason "steal" >/dev/null 2>&1; then
    accepted "orch release --force of its own lock"
  fi
  if [ -n "$other" ] && env -i PATH="$PATH" "$ORCH_BIN" --config "$ORCH_CONFIG" \
    cancel "$other" --reason hostile >/dev/null 2>&1; then
    accepted "orch cancel $other"
  fi
  change bad
  if [ -n "$other" ] &&
    git push -q "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/orch/$other" >/dev/null 2>&1; then
    accepted "a push onto orch/$other"
  fi
  if git push -q --force "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/$ORCH_BASE_BRANCH" >/dev/null 2>&1; then
    accepted "a push to $ORCH_BASE_BRANCH"
  fi
  git reset -q --hard HEAD~1
  setsid sh -c 'echo $$ > /sys/fs/cgroup/unified/cgroup.procs 2>/dev/null;
    echo $$ > /sys/fs/cgroup/cgroup.procs 2>/dev/null; while :; do sleep 0.05; done' \
    </dev/null >/dev/null 2>&1 &
  : >"$ctl/marks/hostile-tried-$ORCH_WORKER_ID${other:+-beside-$other}"
  # Issue 34's attacks (chaos_hostile.sh).
  poison_clone
  write_orchs_files
  read_other_ci
  grade_itself
fi
if [ "${ORCH_TASK%% *}" = hostile ]; then restore_protected; fi
change "$first"
step
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
  step
  change good
  push
  orch report PUSHED_TO_CI --sha "$sha" >/dev/null
done
orch report DONE --note "$ORCH_REPO all green, radicle-push: success" >/dev/null
exit 0
