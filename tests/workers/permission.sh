#!/bin/sh
# Two permission denials; a background process must die with the rest of the group.
sh -c 'read -r p _ </proc/self/stat; echo "$p" >"$1.tmp"; mv "$1.tmp" "$1"; exec sleep 300' sh "$E2E_OUT/background-$ORCH_WORKER_ID.pid" &
echo "WORKING: $ORCH_TASK"
echo "Permission to use Bash has been auto-denied"
echo "Permission to use Bash has been auto-denied"
sleep 300
