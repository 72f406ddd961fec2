#!/usr/bin/env bash
# `make run`: starts a local 3-node keel cluster in the foreground.
# Data under ./data/nodeN, client ports 2181-2183, peer ports 2281-2283,
# metrics on 9181-9183. Ctrl-C stops every server cleanly. The cluster
# secret is $DATA/cluster.secret, made on the first run (docs/security.md).
set -euo pipefail
cd "$(dirname "$0")/.."
KEEL=${KEEL:-build/keel}
DATA=${DATA:-data}
NODES=${NODES:-3}

cluster=""
for i in $(seq 1 "$NODES"); do
  cluster+="${cluster:+,}$i=127.0.0.1:$((2280 + i))"
done

mkdir -p "$DATA"
SECRET="$DATA/cluster.secret"
if [ ! -s "$SECRET" ]; then
  (umask 077 && "$KEEL" secret generate >"$SECRET")
fi

pids=()
stop() {
  trap - INT TERM
  echo
  echo "stopping keel cluster..."
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait || true
  echo "stopped."
}
trap stop INT TERM

for i in $(seq 1 "$NODES"); do
  mkdir -p "$DATA/node$i"
  "$KEEL" server --id "$i" --data-dir "$DATA/node$i" \
    --listen "127.0.0.1:$((2180 + i))" --peer-listen "127.0.0.1:$((2280 + i))" \
    --metrics-listen "127.0.0.1:$((9180 + i))" --cluster "$cluster" \
    --cluster-secret-file "$SECRET" \
    2> >(sed -u "s/^/[node$i] /" >&2) &
  pids+=($!)
done

connect=$(seq -s, -f '127.0.0.1:%g' 2181 $((2180 + NODES)))
cat <<MSG

keel: $NODES servers starting (data in ./$DATA).
  connect string:  $connect
  try:             build/keel status --servers $connect
                   build/keel create /hello world --servers $connect
                   /usr/share/zookeeper/bin/zkCli.sh -server $connect
                   build/keel leader transfer 2 --servers $connect \\
                     --cluster-secret-file $SECRET
                   echo srvr | nc 127.0.0.1 2181
  metrics:         curl http://127.0.0.1:9181/metrics
Press Ctrl-C to stop.

MSG
wait
