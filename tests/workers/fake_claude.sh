#!/bin/sh
# Stands in for `claude -p --output-format stream-json` in one of the ways a real run ends
# without doing anything ($1): `bad_key` (an error result naming the key, exit 1),
# `idle` (a success result, nothing done, exit 0), `rate_limited` (a rejected rate limit with
# its reset an hour ahead, then an error result, exit 1). Reads and drops its prompt.
cat >/dev/null
session=00000000-0000-4000-8000-000000000001
echo "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"$session\",\"model\":\"fake\",\"tools\":[]}"
case "$1" in
bad_key)
    echo "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":true,\"result\":\"Invalid API key · Fix external API key\",\"session_id\":\"$session\",\"total_cost_usd\":0,\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}"
    exit 1
    ;;
idle)
    echo "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"Nothing to do here.\"}]},\"session_id\":\"$session\"}"
    echo "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"Nothing to do here.\",\"session_id\":\"$session\",\"total_cost_usd\":0.001,\"usage\":{\"input_tokens\":10,\"output_tokens\":5}}"
    exit 0
    ;;
rate_limited)
    resets=$(( $(date +%s) + 3600 ))
    echo "{\"type\":\"rate_limit_event\",\"rate_limit_info\":{\"status\":\"rejected\",\"resetsAt\":$resets,\"rateLimitType\":\"five_hour\"}}"
    echo "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":true,\"result\":\"API Error: 429 rate limit reached\",\"session_id\":\"$session\",\"total_cost_usd\":0,\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}"
    exit 1
    ;;
esac
