#!/bin/sh
# A worker bent on outliving its lock (issue 25). It leaves its cgroup (writes itself into the
# cgroup2 root's cgroup.procs), starts with a clean environment (`env -i`: no ORCH_WORKER_ID
# mark) a setsid + double-forked hopper whose every generation starts the next and exits after
# 200 µs, and a setsid looper that forks every 200 µs; then it kills what it can find of its
# guard: `kill -9 $PPID`, and the guard's pid read up the parent chain in /proc. Each of its
# processes has `escaper-<worker id>` in its argv, for the test's sampler. Once all that is
# done it writes $E2E_OUT/escaper-<worker id>.started. Then, if its task says "finish":
# commit, push, wait for green, DONE, and linger; otherwise it waits for the test.
set -eu
. "$(dirname "$0")/lib.sh"
mark="escaper-$ORCH_WORKER_ID"
for root in /sys/fs/cgroup/unified /sys/fs/cgroup; do
    if [ -e "$root/cgroup.procs" ] && [ "$(stat -f -c %T "$root")" = cgroup2fs ]; then
        echo 0 >"$root/cgroup.procs" 2>/dev/null || true
        break
    fi
done
HOP='sleep 0.0002; sh -c "$HOP" "$0" & exit 0'
env -i PATH=/usr/bin:/bin HOP="$HOP" setsid sh -c 'sh -c "$HOP" "$0" & exit 0' "$mark" \
    </dev/null >/dev/null 2>&1 &
env -i PATH=/usr/bin:/bin setsid sh -c 'while :; do sleep 0.0002; done' "$mark" \
    </dev/null >/dev/null 2>&1 &
# Its parent: the guard, or (in a PID namespace) orch's init, whose parent is the guard.
kill -9 "$PPID" 2>/dev/null || true
read -r _ _ _ parent _ </proc/"$HOST_PID"/stat
read -r _ _ _ grandparent _ </proc/"$parent"/stat
kill -9 "$grandparent" 2>/dev/null || true
echo "$HOST_PID" >"$E2E_OUT/$mark.started.tmp"
mv "$E2E_OUT/$mark.started.tmp" "$E2E_OUT/$mark.started"
echo "WORKING: $ORCH_TASK"
case "$ORCH_TASK" in
finish*)
    commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
    push_head
    if ! ci_wait "$SHA"; then
        echo "BLOCKED: CI for $SHA is not green"
        exit 1
    fi
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
    sleep 60
    ;;
*)
    await_release
    ;;
esac
