#!/bin/sh
# Benchmark worker (benches/wakeups.rs, idle): says it is at work once, then waits without a
# word (an agent thinking for a long time) until it is cancelled.
echo "WORKING: idle for $ORCH_TASK"
exec sleep 3600
