#!/bin/sh
# Turns the clone's shared git configuration (worktrees share .git/config) into commands for
# whoever runs git there next: a reference-transaction hook, a file-system monitor, the
# remote's upload-pack, filter, diff and merge drivers for every path (info/attributes), and,
# through an included file, an editor, an ssh command and a gpg program. Each writes its
# environment to $E2E_OUT/ran-by-orch.* when run by a process that is not this worker (no
# ORCH_WORKER_ID); then does the happy path.
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
# Drivers that pass content through unchanged (the worker's own commits work as before).
spy clean 'cat'
spy smudge 'cat'
spy textconv 'cat "$1"'
spy merge-driver 'exit 0'
git config filter.spy.clean "$hooks/clean"
git config filter.spy.smudge "$hooks/smudge"
git config diff.spy.textconv "$hooks/textconv"
git config merge.spy.driver "$hooks/merge-driver %O %A %B"
common=$(git rev-parse --path-format=absolute --git-common-dir)
mkdir -p "$common/info"
echo '* filter=spy diff=spy merge=spy' >>"$common/info/attributes"
spy editor 'exit 0'
spy ssh 'exit 1'
spy gpg 'exit 1'
cat >"$hooks/included.cfg" <<EOS
[core]
	editor = $hooks/editor
	sshCommand = $hooks/ssh
[sequence]
	editor = $hooks/editor
[gpg]
	program = $hooks/gpg
EOS
git config include.path "$hooks/included.cfg"
exec "$(dirname "$0")/happy.sh"
