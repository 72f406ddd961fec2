#!/bin/sh
# run-pinned.sh SIM FILE — runs every "SEED NODES" line of FILE (comments
# start with #); fails if any run fails.
set -u
sim=$1
file=$2
status=0
while read -r seed nodes rest; do
  case "$seed" in ''|'#'*) continue ;; esac
  "$sim" --seed "$seed" --nodes "$nodes" || status=1
done < "$file"
exit $status
