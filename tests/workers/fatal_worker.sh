#!/bin/sh
# A worker for FATAL (tests/integration/fatal.rs); its task says what it does:
#   wait     WORKING, writes its pid to $E2E_OUT/pid-<id>, waits for the test's release,
#            then commits, pushes and reports DONE once CI is green
#   report   WORKING, reports FATAL (its exit code to $E2E_OUT/fatal-<id>.code), then waits
#   secret   commits an OpenSSH private key, pushes, and reports DONE once CI is green
#   token    commits what the test wrote to $E2E_OUT/leak.txt (the forge token), pushes, and
#            reports DONE once CI is green
#   encoded  commits what the test wrote to $E2E_OUT/encoded.bin with an AWS key id base64'd
#            in the commit message, pushes, and reports DONE once CI is green
set -eu
. "$(dirname "$0")/lib.sh"
echo "WORKING: $ORCH_TASK"
echo "$HOST_PID" >"$E2E_OUT/pid-$ORCH_WORKER_ID"
case "$ORCH_TASK" in
wait)
    await_release
    commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
    ;;
report)
    set +e
    orch report FATAL --reason "data corruption: the ledger's totals do not add up" \
        >"$E2E_OUT/fatal-$ORCH_WORKER_ID.out" 2>&1
    echo $? >"$E2E_OUT/fatal-$ORCH_WORKER_ID.code"
    set -e
    await_release
    commit feature.txt "feature by $ORCH_WORKER_ID" "add feature"
    ;;
secret)
    mkdir -p deploy
    printf '%s\n' '-----BEGIN OPENSSH PRIVATE KEY-----' \
        'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW' \
        '-----END OPENSSH PRIVATE KEY-----' >deploy/id_ed25519
    git add deploy/id_ed25519
    git commit -q -m "deploy key"
    ;;
token)
    cp "$E2E_OUT/leak.txt" settings.conf
    git add settings.conf
    git commit -q -m "settings"
    ;;
encoded)
    cp "$E2E_OUT/encoded.bin" notes.bin
    git add notes.bin
    git commit -q -m "notes" -m "aws: $(printf 'AKIA%s' ABCDEFGHIJKLMNOP | base64)"
    ;;
esac
push_head
if ci_wait "$SHA"; then
    echo "DONE: $ORCH_REPO all green, radicle-push: success"
else
    echo "BLOCKED: CI for $SHA is not green"
    exit 1
fi
