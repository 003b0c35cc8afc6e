#!/bin/sh
# Works for a long time (until cancelled), with a background helper in its group.
sleep 300 &
echo "WORKING: $ORCH_TASK"
sleep 300
