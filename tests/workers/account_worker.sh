#!/bin/sh
# A hostile worker run as an account of its own (`worker.user`, issue 25): it tries what a
# worker of orch's own user could do — read and write orch's database and state, signal orch's
# processes, leave its cgroup, write the local forge's remote directly, push to its base
# branch — then does its work through orch: a push (relayed by its supervisor), `orch ci
# status`, DONE. Each attempt's exit code goes to $E2E_OUT/<attempt>.code (output: .out).
. "$(dirname "$0")/lib.sh"
cat >/dev/null
echo "WORKING: $ORCH_TASK"


id -u >"$E2E_OUT/uid"
echo "$HOME" >"$E2E_OUT/home"
attempt read-db cat "$ORCH_STATE_DIR/orch.db"
attempt write-db sh -c 'echo forged >> "$ORCH_STATE_DIR/orch.db"'
attempt list-state ls "$ORCH_STATE_DIR"
attempt read-prompt cat "$ORCH_STATE_DIR/$ORCH_WORKER_ID/prompt.md"
attempt read-forge ls "$ORCH_STATE_DIR/forge/$ORCH_REPO.git"
# Its init (pid 1 of its namespace, orch's) and the guard's parent are not its to signal.
attempt kill-init kill -KILL 1
# Its cgroup is root's: it cannot move itself out (to the root cgroup).
attempt leave-cgroup sh -c 'echo $$ > /sys/fs/cgroup/cgroup.procs'
commit work.txt "done by $ORCH_WORKER_ID" "work"
remote=$(git remote get-url "$ORCH_PUSH_REMOTE")
# Straight at the remote's directory, its hooks bypassed: the directory is not its to write.
attempt push-direct git push -q --receive-pack="git receive-pack" "$remote" "HEAD:refs/heads/$ORCH_BASE_BRANCH"
# Through orch's relay, to its base branch: the remote's hook refuses it.
attempt push-base git push -q "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/$ORCH_BASE_BRANCH"
attempt push-own git push -q
SHA=$(git rev-parse HEAD)
echo "PUSHED_TO_CI: $ORCH_REPO commit $SHA"
attempt ci-status orch ci status --repo "$ORCH_REPO" --sha "$SHA" --wait --timeout 60s
attempt ci-logs orch ci logs --repo "$ORCH_REPO" --sha "$SHA" --job check
: >"$E2E_OUT/attempts-done"
echo "DONE: $ORCH_REPO $SHA"
