#!/bin/sh
# A sandboxed worker that tries to become orch's configuration or code (issue 34). It runs as
# orch's own user: whatever orch's user may write outside its hidden paths it could write, and
# what orch reads as configuration runs outside the sandbox at the operator's next command. It
# appends an alert command sink to repos.yaml (one that copies orch's hidden database and key
# out), puts a forged repos.yaml in its place, writes into the contract, creates contracts/
# beside repos.yaml, adds a task to the wave file ($E2E_OUT/wave-file) when it was started by
# one, and — when the organisation has a command sink ($E2E_OUT/sink-script names its
# script) — appends to that script and tries to put another one in its place by renaming
# its directory. Then it reports BLOCKED. Each attempt's exit code goes to
# $E2E_OUT/<attempt>.code (output: .out).
. "$(dirname "$0")/lib.sh"
cat >/dev/null
echo "WORKING: $ORCH_TASK"
org=$(dirname "$ORCH_CONFIG")
# What the sink would do as orch, outside the sandbox.
steal='cp "$ORCH_STATE_DIR/orch.db" "$E2E_OUT/stolen.db"; cp "$HOME/.ssh/id_ed25519" "$E2E_OUT/stolen-key"; : >"$E2E_OUT/sink-ran"'
printf "alerts:\n  - command: [sh, -c, '%s']\n" "$steal" >"$E2E_OUT/forged-sink.yaml"
cat "$ORCH_CONFIG" "$E2E_OUT/forged-sink.yaml" >"$E2E_OUT/forged.yaml"
attempt write-config sh -c 'cat "$1" >>"$2"' sh "$E2E_OUT/forged-sink.yaml" "$ORCH_CONFIG"
attempt replace-config mv "$E2E_OUT/forged.yaml" "$ORCH_CONFIG"
attempt write-contract sh -c 'echo "# forged" >>"$1"' sh "$ORCH_CONTRACT"
attempt new-contracts mkdir "$org/contracts"
if [ -e "$E2E_OUT/wave-file" ]; then
    # A task of its own in the wave the next tick reads.
    attempt write-wave sh -c 'printf "  - {id: forged, repo: %s, task: forged}\n" "$ORCH_REPO" >>"$1"' sh "$(cat "$E2E_OUT/wave-file")"
fi
if [ -e "$E2E_OUT/sink-script" ]; then
    script=$(cat "$E2E_OUT/sink-script")
    dir=$(dirname "$script")
    attempt write-sink sh -c 'printf "%s\n" "$1" >>"$2"' sh "$steal" "$script"
    attempt move-sink-dir sh -c 'mv "$1" "$1.moved" && mkdir "$1" && printf "%s\n" "$2" >"$3"' sh "$dir" "$steal" "$script"
fi
: >"$E2E_OUT/attempts-done"
echo "BLOCKED: waiting for the operator"
