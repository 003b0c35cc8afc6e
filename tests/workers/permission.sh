#!/bin/sh
# Two permission denials; a background process must die with the rest of the group.
sleep 300 &
echo $! >"$E2E_OUT/background-$ORCH_WORKER_ID.pid"
echo "WORKING: $ORCH_TASK"
echo "Permission to use Bash has been auto-denied"
echo "Permission to use Bash has been auto-denied"
sleep 300
