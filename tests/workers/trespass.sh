#!/bin/sh
# A hostile worker (issue 25, "workers cannot act on orch or on each other"). The task picks
# the part: `victim` waits to be cancelled; `trespass` tries to act on orch and on the victim
# (its id in $E2E_OUT/victim-id); `push` pushes where it may not. Each attempt's answer goes
# to $E2E_OUT/<attempt>.code and .out, then `attempts-done`; then it waits.
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
case "$ORCH_TASK" in
victim*) exec sleep 3600 ;;
esac
victim=$(cat "$E2E_OUT/victim-id")
orch=$ORCH_BIN


case "$ORCH_TASK" in
push*)
    # Pushes a worker may not make: onto another live worker's branch, to its own base
    # branch, a commit to another repository's base branch (its remote is a directory beside
    # this one's on the local forge).
    commit bad.txt "injected by $ORCH_WORKER_ID" "injected"
    remote=$(git remote get-url "$ORCH_PUSH_REMOTE")
    attempt push-other-branch git push -q "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/orch/$victim"
    attempt push-own-base git push -q "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/$ORCH_BASE_BRANCH"
    attempt push-other-base git push -q --force "$(dirname "$remote")/alpha.git" "HEAD:refs/heads/main"
    attempt push-own-branch git push -q "$ORCH_PUSH_REMOTE" "HEAD:refs/heads/$ORCH_BRANCH"
    : >"$E2E_OUT/attempts-done"
    exec sleep 3600
    ;;
esac

# The victim's channel, read where any process of the user can read it: its guard's argv.
channel=
for p in /proc/[0-9]*; do
    args=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    case "$args" in
    *" __guard "*"--worker $victim "*)
        channel=$(printf '%s\n' "$args" | sed -n 's/.*--channel \([^ ]*\).*/\1/p')
        ;;
    esac
done
printf '%s\n' "$channel" >"$E2E_OUT/victim-channel"
attempt foreign-report env ORCH_REPORT_SOCKET="$channel" "$orch" report BLOCKED_PERMISSION --note "as the victim" --json
attempt release "$orch" release "$ORCH_WORKER_ID" --force --reason "steal the chain"
# A scrubbed environment: the command finds the worker from its ancestry, not from ORCH_*.
attempt cancel env -i PATH="$PATH" "$orch" --config "$ORCH_CONFIG" cancel "$victim" --reason "hostile"
attempt hold "$orch" hold "$ORCH_REPO" --reason "freeze everyone"
: >"$E2E_OUT/attempts-done"
# Last: the victim's id in the environment names nobody; the kernel says who speaks (this
# worker), so this is this worker's own report.
attempt own-report env ORCH_WORKER_ID="$victim" "$orch" report BLOCKED --note "I am $victim" --json
exec sleep 3600
