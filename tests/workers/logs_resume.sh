#!/bin/sh
# For `orch logs` across a crash: the first life prints a line, marks $E2E_OUT/ready-<id> and
# hangs (its supervisor is killed); the replacement prints a line and does the whole job.
set -eu
. "$(dirname "$0")/lib.sh"
lives="$E2E_OUT/lives-$ORCH_WORKER_ID"
echo x >> "$lives"
life=$(wc -l < "$lives" | tr -d ' ')
echo "life $life starts"
if [ "$life" = 1 ]; then
    : > "$E2E_OUT/ready-$ORCH_WORKER_ID"
    while :; do sleep 1; done
fi
commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
push_head
ci_wait "$SHA"
echo "DONE: $ORCH_REPO all green, radicle-push: success"
