#!/bin/sh
# Two permission denials; a background process must die with the rest of the group.
sh -c 'read -r p _ </proc/self/stat; echo "$p" >"$1.tmp"; mv "$1.tmp" "$1"; exec sleep 300' sh "$E2E_OUT/background-$ORCH_WORKER_ID.pid" &
# Its pid as /proc names it (inside the worker's PID namespace $! is a local one), written by
# itself: the denials wait until it is there.
n=0
while [ ! -s "$E2E_OUT/background-$ORCH_WORKER_ID.pid" ] && [ "$n" -lt 600 ]; do
    n=$((n + 1))
    sleep 0.01
done
echo "WORKING: $ORCH_TASK"
echo "Permission to use Bash has been auto-denied"
echo "Permission to use Bash has been auto-denied"
sleep 300
