# Sourced by the scripted workers (tests/integration/supervise*.rs). A worker runs with a cleared
# environment: ORCH_* from orch, plus HOME, PATH and E2E_OUT (a directory outside orch's state
# directory that the test reads) passed through.

# This shell's pid as /proc (and the test) names it: inside the worker's PID namespace $$ is a
# local one. `read` is a builtin: /proc/self is this shell.
read -r HOST_PID _ </proc/self/stat

# host_pid_of PID: the /proc pid of this shell's child PID (`$!`), by the last field of its
# NSpid line (its pid in the worker's namespace); PID itself without a namespace.
host_pid_of() {
    for c in $(cat /proc/"$HOST_PID"/task/*/children 2>/dev/null); do
        if [ "$(awk '/^NSpid:/ {print $NF}' /proc/"$c"/status 2>/dev/null)" = "$1" ]; then
            echo "$c"
            return
        fi
    done
    echo "$1"
}

export GIT_AUTHOR_NAME=e2e-worker GIT_AUTHOR_EMAIL=worker@example.invalid
export GIT_COMMITTER_NAME=e2e-worker GIT_COMMITTER_EMAIL=worker@example.invalid
export GIT_CONFIG_NOSYSTEM=1

# Writes the worker's environment to $E2E_OUT/env-$ORCH_WORKER_ID.txt (outside orch's state
# directory) for the test to inspect.
dump_env() {
    env >"$E2E_OUT/env-$ORCH_WORKER_ID.txt"
}

# commit FILE CONTENT MESSAGE
commit() {
    printf '%s\n' "$2" > "$1"
    git add "$1"
    git commit -q -m "$3"
}

# Pushes HEAD (a plain `git push`: orch set the branch's upstream), sets SHA and reports
# PUSHED_TO_CI on stdout.
push_head() {
    git push -q 2>&1
    SHA=$(git rev-parse HEAD)
    echo "PUSHED_TO_CI: $ORCH_REPO commit $SHA"
}

# ci_wait SHA: exit 0 only when orch judges the commit green. A bare `orch`, as a prompt
# would write it: the running orch's directory is first on the worker's PATH.
ci_wait() {
    orch ci status --repo "$ORCH_REPO" --sha "$1" --wait --timeout 60s
}

# Waits (at most 60 s) for the test to create $E2E_OUT/release-$ORCH_WORKER_ID.
await_release() {
    n=0
    while [ ! -e "$E2E_OUT/release-$ORCH_WORKER_ID" ]; do
        n=$((n + 1))
        if [ "$n" -gt 600 ]; then
            echo "BLOCKED: the test never released me"
            exit 9
        fi
        sleep 0.1
    done
}

# attempt NAME CMD...: runs CMD, its output to $E2E_OUT/NAME.out and its exit code to
# $E2E_OUT/NAME.code (the hostile workers' record of what was refused).
attempt() {
    name=$1
    shift
    "$@" >"$E2E_OUT/$name.out" 2>&1
    echo $? >"$E2E_OUT/$name.code"
}
