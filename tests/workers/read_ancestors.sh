#!/bin/sh
# Looks for secrets where a worker can: the environment and command line of every ancestor
# process (/proc/<pid>/environ, /proc/<pid>/cmdline, up the parent chain to init), written to
# $E2E_OUT/ancestors-$ORCH_WORKER_ID.txt; then does the happy path.
set -eu
. "$(dirname "$0")/lib.sh"
out="$E2E_OUT/ancestors-$ORCH_WORKER_ID.txt"
: >"$out"
pid=$HOST_PID
while [ "$pid" -gt 1 ]; do
    echo "== pid $pid" >>"$out"
    tr '\0' '\n' <"/proc/$pid/environ" >>"$out" 2>/dev/null || echo "(environ unreadable)" >>"$out"
    tr '\0' ' ' <"/proc/$pid/cmdline" >>"$out" 2>/dev/null || true
    echo >>"$out"
    pid=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null || echo 1)
done
echo "== done" >>"$out"
exec "$(dirname "$0")/happy.sh"
