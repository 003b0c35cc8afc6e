#!/bin/sh
# Claims DONE twice without pushing anything (two `done_without_ci_proof` alerts within the
# de-duplication window), then waits until the test releases it.
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
echo "DONE: nothing pushed"
echo "DONE: still nothing pushed"
await_release
