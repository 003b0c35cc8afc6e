#!/bin/sh
# Records the argv orch started it with (one argument a line) in $E2E_OUT/argv-<worker id>,
# then does what a wave worker does.
printf '%s\n' "$@" >"$E2E_OUT/argv-$ORCH_WORKER_ID"
exec sh "$(dirname "$0")/wave_worker.sh"
