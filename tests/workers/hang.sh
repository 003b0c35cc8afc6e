#!/bin/sh
# Hangs and ignores SIGTERM (and so does its background child): only SIGKILL ends it.
trap '' TERM
sleep 600 &
echo "WORKING: $ORCH_TASK"
sleep 600
