#!/bin/sh
# Benchmark worker (benches/wakeups.rs, latency): commits, pushes, says so and ends its turn
# (exit 0): DONE is then orch's to declare as soon as CI for the push is green.
set -eu
. "$(dirname "$0")/lib.sh"
commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
push_head
