#!/bin/sh
# Starts what a process group does not contain: a `setsid` daemon and a double-fork daemon
# (setsid, fork, the middle process exits), plus an ordinary background child. Writes
# "<role> <pid>" lines for itself and each of them to $E2E_OUT/pids-$ORCH_WORKER_ID (whole,
# once every pid is known). Then, when its task says "finish": commit, push, wait for green,
# DONE (as happy.sh); otherwise it waits until the test releases it (tests/workers/lib.sh).
set -eu
. "$(dirname "$0")/lib.sh"
out="$E2E_OUT/pids-$ORCH_WORKER_ID"
tmp="$out.tmp"
setsid sh -c 'read -r p _ </proc/self/stat; echo "setsid $p" > "$1"; exec sleep 600' sh "$tmp.setsid" \
    </dev/null >/dev/null 2>&1 &
setsid sh -c 'sh -c "read -r p _ </proc/self/stat; echo \"double-fork \$p\" > \"\$1\"; exec sleep 600" sh "$1" & exit 0' \
    sh "$tmp.double" </dev/null >/dev/null 2>&1 &
sleep 600 &
child=$(host_pid_of $!)
n=0
while [ ! -s "$tmp.setsid" ] || [ ! -s "$tmp.double" ]; do
    n=$((n + 1))
    if [ "$n" -gt 600 ]; then
        echo "BLOCKED: the daemons never wrote their pids"
        exit 9
    fi
    sleep 0.05
done
{
    echo "worker $HOST_PID"
    echo "child $child"
    cat "$tmp.setsid" "$tmp.double"
} > "$tmp"
mv "$tmp" "$out"
echo "WORKING: $ORCH_TASK"
case "$ORCH_TASK" in
finish*)
    commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
    push_head
    if ci_wait "$SHA"; then
        echo "DONE: $ORCH_REPO all green, radicle-push: success"
    else
        echo "BLOCKED: CI for $SHA is not green"
        exit 1
    fi
    ;;
*)
    await_release
    ;;
esac
