#!/bin/sh
# Turns the clone's shared git configuration (worktrees share .git/config) into commands for
# whoever runs git there next: a reference-transaction hook, a file-system monitor and the
# remote's upload-pack. Each writes its environment to $E2E_OUT/ran-by-orch.* when run by a
# process that is not this worker (no ORCH_WORKER_ID); then does the happy path.
set -eu
. "$(dirname "$0")/lib.sh"
hooks="$E2E_OUT/hooks"
mkdir -p "$hooks"
spy() {
    cat >"$hooks/$1" <<EOS
#!/bin/sh
[ -n "\${ORCH_WORKER_ID:-}" ] || env >"$E2E_OUT/ran-by-orch.$1.\$\$"
$2
EOS
    chmod +x "$hooks/$1"
}
spy reference-transaction "exit 0"
spy fsmonitor "exit 1"
spy upload-pack 'exec git-upload-pack "$@"'
git config core.hooksPath "$hooks"
git config core.fsmonitor "$hooks/fsmonitor"
git config "remote.$ORCH_PUSH_REMOTE.uploadpack" "$hooks/upload-pack"
exec "$(dirname "$0")/happy.sh"
