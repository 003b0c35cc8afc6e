#!/bin/sh
# Scripted worker for tests/integration/chaos.rs: the whole job, a little slowly, so that kills land in
# every phase. $1 is a control directory outside orch's state directory (prompts are saved
# there as prompts/<worker id>.<life>). A task whose first word is `flaky` pushes a change CI
# rejects first (in its first life only), then fixes it; one whose first word is `liar` lies
# first (below). CI passes when status.txt says `good`.
. "$(dirname "$0")/chaos_lib.sh"
step() { sleep 0.2; }

first=good
if [ "${ORCH_TASK%% *}" = flaky ] && [ "$life" = 1 ]; then first=bad; fi
echo "chaos worker: life $life of $ORCH_WORKER_ID"
step
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
