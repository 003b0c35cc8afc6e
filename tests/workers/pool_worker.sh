#!/bin/sh
# Two workers of a pool of accounts (`worker.users`, issue 25): the `victim` tells where its
# clone is and waits; the `attacker` tries to read and write that clone, then both finish their
# work (commit, push, DONE). Attempts' exit codes go to $E2E_OUT/<attempt>.code (output: .out).
. "$(dirname "$0")/lib.sh"
cat >/dev/null
# Its answers are read by the other worker's account too.
umask 022
echo "WORKING: $ORCH_TASK"
waitfor() {
    n=0
    while [ ! -e "$E2E_OUT/$1" ] && [ "$n" -lt 1200 ]; do sleep 0.05; n=$((n + 1)); done
}
case "$ORCH_TASK" in
victim*)
    id -u >"$E2E_OUT/victim-uid"
    pwd >"$E2E_OUT/victim-wt.tmp" && mv "$E2E_OUT/victim-wt.tmp" "$E2E_OUT/victim-wt"
    waitfor attack-done
    ;;
attacker*)
    id -u >"$E2E_OUT/attacker-uid"
    waitfor victim-wt
    wt=$(cat "$E2E_OUT/victim-wt")
    attempt read-victim ls "$wt"
    attempt write-victim sh -c "echo pwned > '$wt/pwned.txt'"
    : >"$E2E_OUT/attack-done"
    ;;
esac
commit work.txt "$ORCH_TASK" "work"
push_head
ci_wait "$SHA" >/dev/null
echo "DONE: $ORCH_REPO $SHA"
