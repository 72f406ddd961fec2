#!/bin/sh
# run-pinned.sh SIM FILE — runs every "SEED NODES [--flag ...] [# comment]"
# line of FILE (lines starting with # are comments); fails if any run fails.
set -u
sim=$1
file=$2
status=0
while read -r line; do
  line=${line%%#*}
  set -- $line
  [ $# -ge 2 ] || continue
  seed=$1
  nodes=$2
  shift 2
  "$sim" --seed "$seed" --nodes "$nodes" "$@" || status=1
done < "$file"
exit $status
