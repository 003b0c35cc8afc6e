#!/bin/sh
# Prints 200 MB (lines of 1000 bytes), then a 20 MB line without a newline, then BLOCKED,
# and waits for the test.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
line=$(head -c 1000 /dev/zero | tr '\0' y)
yes "$line" | head -c 200000000
head -c 20000000 /dev/zero | tr '\0' z
echo
echo "BLOCKED: flood done"
await_release
