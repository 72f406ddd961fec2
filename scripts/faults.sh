#!/usr/bin/env bash
# `make faults DURATION=30m`: a long fault-injection run for release checks
# (docs/testing-faults.md). A 3-server cluster behind the peer-link proxy,
# kazoo workloads, every nemesis kind (kill -9, pause, partitions, one-way
# links, membership changes, leader transfer, kill -9 of all servers), then
# every checker.
#
#   scripts/faults.sh [DURATION]          default 10m (30s, 45m, 2h ...)
#   SEED=N        repeat a run's seeded choices (printed at the start)
#   NEMESIS=...   all (default), default (minority faults only), none, or a
#                 comma list of kinds
#   OUT=DIR       where the run is kept (default build/faults-runs/...)
#   PLANTED=1     also prove the checkers bite: build keel with each planted
#                 bug and require it to be caught (tests/faults/test_planted_bugs.py)
#   BROKERS=N     also start N `keel broker`s and run the Kafka workload
#                 (confluent-kafka acks=all producers, the Kafka checker);
#                 NEMESIS then defaults to all,kafka (every broker nemesis too)
#   KAFKA_LEADERS=one   every partition led by one broker (with
#                 NEMESIS=kafka-safe: the mix that is safe before replication)
#   KAFKA_IDEMPOTENT=1  producers with enable.idempotence=true
#   KAFKA_GROUP=N  also N consumers in one group committing what they read,
#                 the group checker, and (with the default NEMESIS) the
#                 coordinator nemeses (all,kafka,groups)
#
# Exit status 0 when every checker passed (and, with PLANTED=1, every
# planted bug was caught). The run directory holds the history, the nemesis
# schedule, the final reads, the report and the servers' logs; re-check it
# with `python3 tests/faults/runner.py check DIR`.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-${DURATION:-10m}}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
KEEL=${KEEL:-build/keel}
BROKERS=${BROKERS:-0}
KAFKA_GROUP=${KAFKA_GROUP:-0}
if [ "$BROKERS" -gt 0 ] && [ "$KAFKA_GROUP" -gt 0 ]; then NEMESIS=${NEMESIS:-all,kafka,groups}
elif [ "$BROKERS" -gt 0 ]; then NEMESIS=${NEMESIS:-all,kafka}; else NEMESIS=${NEMESIS:-all}; fi
kafka_args=()
if [ "$BROKERS" -gt 0 ]; then
  kafka_args+=(--brokers "$BROKERS")
  [ -n "${KAFKA_LEADERS:-}" ] && kafka_args+=(--kafka-leaders "$KAFKA_LEADERS")
  [ "${KAFKA_IDEMPOTENT:-0}" = 1 ] && kafka_args+=(--kafka-idempotent)
  [ "$KAFKA_GROUP" -gt 0 ] && kafka_args+=(--kafka-group "$KAFKA_GROUP")
fi
OUT=${OUT:-build/faults-runs/run-$(date +%Y%m%d-%H%M%S)}

if ! "$PY" -c 'import kazoo, pytest' 2>/dev/null; then
  echo "faults: $PY needs kazoo and pytest (scripts/install-deps.sh)" >&2
  exit 2
fi
if [ "$BROKERS" -gt 0 ] && ! "$PY" -c 'import confluent_kafka' 2>/dev/null; then
  echo "faults: $PY needs confluent_kafka for BROKERS=$BROKERS (scripts/install-deps.sh)" >&2
  exit 2
fi
[ -x "$KEEL" ] || { echo "faults: no $KEEL (run make first)" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")"

status=0
"$PY" tests/faults/runner.py run --duration "$DURATION" --nemesis "$NEMESIS" \
  --keel "$KEEL" --out "$OUT" ${SEED:+--seed "$SEED"} ${kafka_args[@]+"${kafka_args[@]}"} \
  || status=$?

if [ "${PLANTED:-0}" = 1 ]; then
  keel_abs=$(realpath "$KEEL")
  (cd tests/faults && KEEL="$keel_abs" "$PY" -m pytest -q -s \
     -p no:cacheprovider test_planted_bugs.py) || status=1
fi
exit $status
