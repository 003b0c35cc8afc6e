#!/bin/sh
# Gives up in WORKING.
echo "WORKING: $ORCH_TASK"
exit 3
