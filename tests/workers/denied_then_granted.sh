#!/bin/sh
# Denied twice (Claude Code's text) until the test grants the permission
# ($E2E_OUT/granted-$ORCH_WORKER_ID); once granted — in a respawned life — does the happy path.
set -eu
. "$(dirname "$0")/lib.sh"
if [ ! -e "$E2E_OUT/granted-$ORCH_WORKER_ID" ]; then
    echo "WORKING: $ORCH_TASK"
    echo "Permission to use Bash with command git push origin HEAD has been denied."
    echo "Permission to use Bash with command git push origin HEAD has been denied."
    sleep 60
    exit 1
fi
exec "$(dirname "$0")/happy.sh"
