#!/bin/sh
# A hostile worker in a sandbox (`worker.sandbox`, issue 25): orch runs unprivileged and the
# worker as orch's own user, so file modes keep nothing from it — its mount namespace must. It
# tries orch's database and state, the repository's clone, orch's home's key, orch's
# processes, the cgroup tree, undoing its mounts (directly and from a user namespace of its
# own), `..` out of its workspace, an operator command, a push around the relay; then does its
# work through orch. Each attempt's exit code goes to $E2E_OUT/<attempt>.code (output: .out).
. "$(dirname "$0")/lib.sh"
cat >/dev/null
echo "WORKING: $ORCH_TASK"

clone=$(cat "$E2E_OUT/clone-path")
orch_home=$(cat "$E2E_OUT/orch-home")
id -u >"$E2E_OUT/uid"
echo "$HOME" >"$E2E_OUT/home"
attempt read-guide cat "$ORCH_CI_GUIDE" "$ORCH_HANDOFF"
attempt read-db cat "$ORCH_STATE_DIR/orch.db"
attempt write-db sh -c 'echo forged >> "$ORCH_STATE_DIR/orch.db"'
attempt read-prompt cat "$ORCH_STATE_DIR/$ORCH_WORKER_ID/prompt.md"
attempt read-forge ls "$ORCH_STATE_DIR/forge/$ORCH_REPO.git"
attempt read-clone ls "$clone/.git"
attempt read-key cat "$orch_home/.ssh/id_ed25519"
# What it sees of the state directory, from above and with `..` from its own workspace.
ls -A "$ORCH_STATE_DIR" >"$E2E_OUT/state-listing" 2>&1
(cd .. && cd .. && ls -A) >"$E2E_OUT/dotdot-listing" 2>&1
# orch's processes: none in its /proc (grep fails when nothing matches).
attempt see-orch sh -c 'for f in /proc/[0-9]*/cmdline; do tr "\0" " " <"$f"; echo; done | grep -E "__super[v]ise|__guar[d]"'
attempt leave-cgroup sh -c 'echo $$ > /sys/fs/cgroup/cgroup.procs'
attempt umount umount -l "$ORCH_STATE_DIR"
attempt undo-in-userns unshare -Urm sh -c 'umount -l "$0" && cat "$0/orch.db"' "$ORCH_STATE_DIR"
attempt operator orch release "$ORCH_WORKER_ID" --force
commit work.txt "done by $ORCH_WORKER_ID" "work"
remote=$(git remote get-url "$ORCH_PUSH_REMOTE")
attempt push-direct git push -q --receive-pack="git receive-pack" "$remote" "HEAD:refs/heads/$ORCH_BASE_BRANCH"
attempt push-base git push -q "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/$ORCH_BASE_BRANCH"
attempt push-own git push -q
SHA=$(git rev-parse HEAD)
echo "PUSHED_TO_CI: $ORCH_REPO commit $SHA"
attempt ci-status orch ci status --repo "$ORCH_REPO" --sha "$SHA" --wait --timeout 60s
: >"$E2E_OUT/attempts-done"
echo "DONE: $ORCH_REPO $SHA"
