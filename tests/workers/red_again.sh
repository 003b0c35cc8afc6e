#!/bin/sh
# CI stays red (job `test` wants a file named `fixed`, never added): the first push and four
# fix attempts, each reported FIXING_CI after its red, their SHAs appended to
# $E2E_OUT/shas-$ORCH_WORKER_ID. Then gives up BLOCKED.
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
i=0
while [ $i -lt 5 ]; do
    i=$((i + 1))
    commit "try-$i" "try $i" "try $i"
    push_head
    echo "$SHA" >>"$E2E_OUT/shas-$ORCH_WORKER_ID"
    if ci_wait "$SHA"; then
        echo "BLOCKED: try $i was expected to be red"
        exit 1
    fi
    echo "FIXING_CI: test - the file named fixed is missing (try $i)"
done
echo "BLOCKED: still red after four fixes"
