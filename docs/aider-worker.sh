#!/bin/sh
# aider as an orch worker. In repos.yaml:
#
#   worker:
#     agent: aider                    # orch reads aider's output: its cost line, the model's reply
#     model: gpt-4o
#     command: [sh, /path/to/aider-worker.sh, "{model}"]   # further arguments go to aider
#
# aider edits files and commits them itself (auto-commits), but with --yes-always it answers
# "no" to every shell command: it can neither push nor run `orch report`. This wrapper runs it
# on orch's prompt (stdin), then does both from what aider did:
# - a new commit: pushed, PUSHED_TO_CI, then DONE once orch says its CI is green (a red CI
#   ends the run: the respawn's prompt gives aider the failure to fix);
# - no commit (the model refused, asked a question, or its API failed): no claim, exit 0.
#   orch then ends the worker BLOCKED with the model's last reply or the API's error.
set -u
before=$(git rev-parse HEAD) || exit 1
aider --message-file /dev/stdin --yes-always --no-pretty --no-check-update --no-analytics \
    --no-gitignore "$@" || exit $?
after=$(git rev-parse HEAD) || exit 1
if [ "$before" = "$after" ]; then
    exit 0
fi
git push -q || { echo "BLOCKED: git push of $after failed"; exit 1; }
echo "PUSHED_TO_CI: $ORCH_REPO commit $after"
if orch ci status --repo "$ORCH_REPO" --sha "$after" --wait --timeout 30m; then
    echo "DONE: $ORCH_REPO all green"
else
    exit 1
fi
