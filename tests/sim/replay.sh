#!/bin/sh
# replay.sh SIM SEED NODES [FLAGS...] — runs one seed twice; the trace
# hashes must match.
set -eu
sim=$1
seed=$2
nodes=$3
shift 3
a=$("$sim" --seed "$seed" --nodes "$nodes" "$@")
b=$("$sim" --seed "$seed" --nodes "$nodes" "$@")
echo "$a"
echo "$b"
ha=$(echo "$a" | sed -n 's/.* trace=\([0-9a-f]*\) .*/\1/p')
hb=$(echo "$b" | sed -n 's/.* trace=\([0-9a-f]*\) .*/\1/p')
if [ -z "$ha" ] || [ "$ha" != "$hb" ]; then
  echo "replay: trace hashes differ or run failed" >&2
  exit 1
fi
echo "replay: identical trace hash $ha"
