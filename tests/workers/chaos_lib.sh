# Sourced by the scripted workers of tests/integration/{chaos,resume}.rs (chaos_worker.sh,
# resume_worker.sh) with the control directory as $1. Counts this start of the worker (its
# "life": lives/<worker id> gets its pid), saves its prompt (stdin) as
# prompts/<worker id>.<life> and defines what both scripts do with git and orch.
# CI (see tests/support/org.rs, Ci::Gated and Ci::Sleep) passes when status.txt says `good`.
set -u
ctl=$1
mkdir -p "$ctl/prompts" "$ctl/lives" "$ctl/marks" "$ctl/pushed"
# The pid /proc names (inside the worker's PID namespace $$ is a local one).
read -r host_pid _ </proc/self/stat
echo "$host_pid" >> "$ctl/lives/$ORCH_WORKER_ID"
life=$(wc -l < "$ctl/lives/$ORCH_WORKER_ID" | tr -d ' ')
prompt="$ctl/prompts/$ORCH_WORKER_ID.$life"
# Where orch says this life stands (before the prompt: the tests wait for the prompt).
echo "${ORCH_MILESTONE:-unset} ${ORCH_REPLACEMENT:-unset}" > "$prompt.stands"
# Saved whole or not at all: the tests read it as soon as it exists.
cat > "$prompt.tmp" && mv "$prompt.tmp" "$prompt"

orch() { "$ORCH_BIN" "$@"; }
# change WORD: commit status.txt saying WORD
change() {
  printf '%s\n' "$1" > status.txt
  git add -A
  git -c user.name=worker -c user.email=worker@example.invalid commit -q --allow-empty \
    -m "$ORCH_REPO: status $1 (life $life) by $ORCH_WORKER_ID"
}
# Pushes HEAD to the worker's branch on the forge (once more if the first try fails), sets $sha
# and keeps it as pushed/<worker id> ("<repo> <sha>": what chaos's hostile worker learns of
# another worker's commits).
push() {
  git push -q "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/$ORCH_BRANCH" 2>/dev/null ||
    git push -q "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/$ORCH_BRANCH"
  sha=$(git rev-parse HEAD)
  echo "$ORCH_REPO $sha" >"$ctl/pushed/$ORCH_WORKER_ID.tmp" &&
    mv "$ctl/pushed/$ORCH_WORKER_ID.tmp" "$ctl/pushed/$ORCH_WORKER_ID"
}
