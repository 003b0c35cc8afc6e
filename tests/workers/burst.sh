#!/bin/sh
# A burst of milestone lines (more than the supervisor's channel holds), its real last claim,
# and an immediate exit.
i=0
while [ $i -lt 1000 ]; do
    echo "WORKING: step $i"
    i=$((i + 1))
done
echo "BLOCKED: need a human for the last step"
exit 0
