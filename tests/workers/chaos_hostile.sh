# Sourced by tests/workers/chaos_worker.sh (after chaos_lib.sh): what a `hostile` task tries in its
# first life beyond issue 25's trespasses — issue 34's attacks that apply to the chaos run. Each
# attempt leaves $ctl/marks/hostile-tried-<attack>-<worker id>; whatever orch accepts leaves
# $ctl/marks/hostile-accepted-<worker id> (or -<attack>-…) saying what, which fails the test.
# Functions only: chaos_worker.sh calls them.

accepted() { echo "$1" >>"$ctl/marks/hostile-accepted-$ORCH_WORKER_ID"; }
tried() { : >"$ctl/marks/hostile-tried-$1-$ORCH_WORKER_ID"; }

# The commit this worker started from, kept once (before its first change) for every later life.
remember_base() {
  [ -s "$ctl/base-$ORCH_WORKER_ID" ] && return 0
  git rev-parse HEAD >"$ctl/base-$ORCH_WORKER_ID.tmp" &&
    mv "$ctl/base-$ORCH_WORKER_ID.tmp" "$ctl/base-$ORCH_WORKER_ID"
}

# Every life: the protected CI script as the base has it, whatever a killed life left committed
# or not (a change that touches it would be held for `orch approve`, and the task never DONE).
restore_protected() {
  git checkout -q "$(cat "$ctl/base-$ORCH_WORKER_ID")" -- ci/check.sh 2>/dev/null || :
}

# Issue 34 item 8: commands in the clone's git configuration (shared by every worktree of the
# clone; a worker of its own account has a clone of its own) — a clean and a smudge filter for
# every path (info/attributes now, .gitattributes in its change), a file-system monitor and
# hooks. Each spy passes its input through and, run by a process that is not a worker (no
# ORCH_WORKER_ID: orch's own git — a spawn, a resume, a landing, `orch gc`), leaves a mark.
poison_clone() {
  spies="$ctl/spies-$ORCH_WORKER_ID"
  mkdir -p "$spies" || return 0
  spy() {
    cat >"$spies/$1" <<EOS
#!/bin/sh
[ -n "\${ORCH_WORKER_ID:-}" ] || echo "orch's own git ran the clone's $1 (pid \$\$, in \$(pwd))" >>"$ctl/marks/hostile-accepted-git-$1-\$\$"
$2
EOS
    chmod +x "$spies/$1"
  }
  spy clean 'cat'
  spy smudge 'cat'
  spy fsmonitor 'exit 1'
  spy reference-transaction 'exit 0'
  spy post-checkout 'exit 0'
  spy post-merge 'exit 0'
  git config filter.x.clean "$spies/clean" &&
    git config filter.x.smudge "$spies/smudge" &&
    git config core.fsmonitor "$spies/fsmonitor" &&
    git config core.hooksPath "$spies" || return 0
  common=$(git rev-parse --path-format=absolute --git-common-dir)
  mkdir -p "$common/info" && echo '* filter=x' >>"$common/info/attributes"
  tried git-config
}

# Issue 34 item 6: with workers of an account of their own (whose files are not orch's), orch's
# configuration and code: an alert command sink appended to repos.yaml (one that would leave a
# mark if orch ran it), a line in the contract, a contracts/ directory beside repos.yaml. A
# worker of orch's own account may write them (README: isolation needs worker.users or
# worker.sandbox); the chaos run has no wave file and no sink program of its own to try.
write_orchs_files() {
  [ "$(stat -c %u "$ORCH_CONFIG")" != "$(id -u)" ] || return 0
  sink="alerts:\n  sinks:\n    - command: [sh, -c, 'echo ran >>$ctl/marks/hostile-accepted-alert-sink']\n"
  if sh -c 'printf "%b" "$1" >>"$2"' sh "$sink" "$ORCH_CONFIG" 2>/dev/null; then
    accepted "an alert command sink appended to $ORCH_CONFIG"
  fi
  if [ -n "${ORCH_CONTRACT:-}" ] && sh -c 'echo "# forged" >>"$1"' sh "$ORCH_CONTRACT" 2>/dev/null; then
    accepted "a line written into the contract $ORCH_CONTRACT"
  fi
  if mkdir "$(dirname "$ORCH_CONFIG")/contracts" 2>/dev/null; then
    accepted "a contracts/ directory made beside $ORCH_CONFIG"
  fi
  tried orchs-files
}

# Issue 34 item 10: where its supervisor answers its CI questions (a worker of another account),
# `orch ci logs` / `ci status` of another worker's commit (learnt from $ctl/pushed, as a shared log
# would tell it) in another repository. "not answered" is the refusal; an answer — a log, a
# verdict, "no runs" — is a trespass; no supervisor on the channel (killed) decides nothing.
read_other_ci() {
  [ "${ORCH_CI_VIA:-}" = channel ] || return 0
  for f in "$ctl"/pushed/*; do
    case "$f" in *.tmp) continue ;; esac
    [ -f "$f" ] || continue
    read -r repo other_sha <"$f" || continue
    [ "$repo" != "$ORCH_REPO" ] || continue
    for q in logs status; do
      out=$(orch ci "$q" --repo "$repo" --sha "$other_sha" 2>&1)
      code=$?
      case "$out" in
      *"not answered"*) tried "ci-$q-of-${f##*/}" ;;
      *) if [ "$code" -le 1 ]; then
        accepted "orch ci $q of ${f##*/}'s commit $other_sha in $repo (exit $code): $out"
      fi ;;
      esac
    done
    return 0
  done
}

# Issue 34 items 7 and 9: a change that grades itself — the protected CI script (ci/check.sh,
# which the repository's job names) turned into `exit 0` beside status.txt `bad` — that also
# adds a check the CI script runs (checks/daemon.sh: a `setsid` loop that leaves a mark if it is
# still alive 5 s after its job ended; its pid in $ctl/ci-daemons for the test) and a
# .gitattributes sending every path through the clone's filter (item 8). Pushed and claimed: CI
# green or a DONE accepted is a trespass (a DONE orch accepts stops the worker before it can say
# so: the test also finds the base's ci/check.sh as it was). The daemon's check stays in the
# change, so every later CI run of the repository (its landing, its base, the next rounds)
# starts one too.
grade_itself() {
  mkdir -p checks ci
  cat >checks/daemon.sh <<EOS
# A check of the worker's change that leaves a daemon (issue 34 item 7); ci/check.sh runs it.
job=\$PPID
setsid sh -c '
read -r me _ </proc/self/stat
: >"$ctl/ci-daemons/\$me"
cd /
while kill -0 "\$1" 2>/dev/null; do sleep 0.1; done
sleep 5
echo "a daemon a CI job started (pid \$me) was alive 5 s after its job ended" >>"$ctl/marks/hostile-accepted-ci-daemon-\$me"
while :; do sleep 1; done
' sh "\$job" </dev/null >/dev/null 2>&1 &
EOS
  echo '* filter=x' >.gitattributes
  echo 'exit 0' >ci/check.sh
  change bad
  push
  tried protected-ci
  orch report PUSHED_TO_CI --sha "$sha" >/dev/null 2>&1
  if orch ci status --repo "$ORCH_REPO" --sha "$sha" --wait --timeout 120s >/dev/null 2>&1; then
    accepted "CI green for $sha, whose ci/check.sh says exit 0 and status.txt bad"
  fi
  if orch report DONE --note "all green" >/dev/null 2>&1; then
    accepted "DONE for $sha, whose ci/check.sh says exit 0 and status.txt bad"
  fi
  orch report FIXING_CI --job check --note "status.txt must say good" >/dev/null 2>&1 || :
}
