#!/usr/bin/env bash
# compare.sh — keel and Apache ZooKeeper side by side, in one run
# (`make bench`). Starts a 3-node keel cluster and a 3-node ZooKeeper 3.8
# ensemble on loopback (data under a temporary directory), runs the same
# keel-zkbench workloads against both, alternating keel, zookeeper, keel,
# zookeeper ..., and writes bench/results/latest.{md,json} and compare.png.
#
#   bench/compare.sh [--quick] [--rounds N] [--duration S] [--warmup S]
#                    [--znodes N] [--failovers N] [--systems keel,zookeeper]
#                    [--workloads create,set,get,mix,sync,failover,memory]
#                    [--out DIR] [--keep] [--calibrate]
#
# After start-up every system gets the same untimed priming load (create and
# mix, 5 s each) so that ZooKeeper's JVM is warm. Workloads (every system,
# every round):
#   create/set/get/mix  8 sessions x 32 in flight, 100 B values, spread over
#                       the 3 servers; mix = 90% get / 10% set
#   sync                one session, synchronous set, one at a time
#   failover            one client writing synchronously; the leader (found
#                       with `srvr`) gets SIGKILL; time to the first write
#                       issued after the kill that succeeds; the killed server
#                       is restarted and the cluster waited for before the next
#   memory              load --znodes znodes of 100 B (multi ops of 100), VmRSS
#                       of every server before and 5 s after; for ZooKeeper
#                       also the live heap after a full GC (jcmd GC.run)
#
# --quick: 3 s runs, 100,000 znodes, 2 failovers (about 2-3 minutes).
# Default: 6 s runs after 2 s warm-up, 1,000,000 znodes, 3 failovers.
# --keep leaves the temporary directory (server logs, raw results).
# --calibrate runs two ZooKeeper ensembles against each other instead
# ("zookeeper2" vs "zookeeper", results in bench/results/calibration/): an
# A/A run whose ratios show how much of a difference is noise on this machine.
# A system that does not start is reported as such; the other is still
# measured, and the exit status is 1. KEEL=path/to/keel benchmarks another
# keel binary; BENCH_NOTE="..." is printed in the report (say which build).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ZKBENCH=${ZKBENCH:-$ROOT/build/keel-zkbench}
ZK_ENSEMBLE=$ROOT/scripts/zk-ensemble.sh
KEEL_CLUSTER=$ROOT/bench/keel-cluster.sh

ROUNDS=2 DURATION=6 WARMUP=2 ZNODES=1000000 FAILOVERS=3 PRIME=5
SYSTEMS=keel,zookeeper
WORKLOADS=create,set,get,mix,sync,failover,memory
OUT=$ROOT/bench/results
KEEP=0 QUICK=0 OUT_GIVEN=0
SESSIONS=8 INFLIGHT=32 VALUE_BYTES=100

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 DURATION=3 WARMUP=1 ZNODES=100000 FAILOVERS=2 PRIME=2; shift ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --znodes) ZNODES=$2; shift 2 ;;
    --failovers) FAILOVERS=$2; shift 2 ;;
    --systems) SYSTEMS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --out) OUT=$2 OUT_GIVEN=1; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --calibrate) SYSTEMS=zookeeper2,zookeeper; [ "$OUT_GIVEN" = 1 ] || OUT=$ROOT/bench/results/calibration; shift ;;
    -h|--help) usage ;;
    *) echo "compare: unknown option $1" >&2; usage ;;
  esac
done
[ -x "$ZKBENCH" ] || { echo "compare: $ZKBENCH not found; run make first" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/keel-bench.XXXXXX")
RESULTS=$TMP/results.jsonl
: >"$RESULTS"
STARTED=()     # systems whose cluster we started (for cleanup)
ACTIVE=()      # systems that came up and get measured
STATUS=0

log() { printf '[compare %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

cluster_script() {
  case "$1" in
    keel) echo "$KEEL_CLUSTER" ;;
    zookeeper|zookeeper2) echo "$ZK_ENSEMBLE" ;;
    *) echo "compare: unknown system $1" >&2; exit 2 ;;
  esac
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local rc=$? sys
  trap - EXIT INT TERM
  for sys in "${STARTED[@]}"; do
    "$(cluster_script "$sys")" stop "$TMP/$sys" >/dev/null 2>&1 || true
  done
  if [ "$KEEP" = 1 ]; then
    log "kept $TMP"
  else
    rm -rf "$TMP"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# record SYSTEM WORKLOAD ROUND JSON|"" [EXTRA-JSON-FIELDS]
record() {
  local sys=$1 workload=$2 round=$3 result=$4 extra=${5:-}
  local load
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  if [ -n "$result" ]; then
    printf '{"system":"%s","workload":"%s","round":%s,"loadavg":"%s"%s,"result":%s}\n' \
      "$sys" "$workload" "$round" "$load" "$extra" "$result" >>"$RESULTS"
  else
    printf '{"system":"%s","workload":"%s","round":%s,"loadavg":"%s"%s,"error":"run failed, see %s"}\n' \
      "$sys" "$workload" "$round" "$load" "$extra" "client.log" >>"$RESULTS"
  fi
}

connect_of() { "$(cluster_script "$1")" connect "$TMP/$1"; }

zkbench() {
  "$ZKBENCH" --client-log "$TMP/client.log" "$@" 2>>"$TMP/zkbench.log" | tail -n 1
}

start_systems() {
  local sys connect
  IFS=, read -r -a wanted <<<"$SYSTEMS"
  for sys in "${wanted[@]}"; do
    log "starting 3-node $sys"
    STARTED+=("$sys")
    if connect=$("$(cluster_script "$sys")" start 3 "$TMP/$sys" 2>>"$TMP/start-$sys.log"); then
      log "$sys up: $connect"
      ACTIVE+=("$sys")
    else
      log "$sys did not start (see $(tail -n 1 "$TMP/start-$sys.log"))"
      # The reason goes into JSON: drop quotes and backslashes, hide the temp path.
      # shellcheck disable=SC1003
      printf '{"system":"%s","workload":"start","round":0,"error":"%s"}\n' "$sys" \
        "$(tail -n 1 "$TMP/start-$sys.log" | sed "s|$TMP|<tmpdir>|g" | tr -d '"\\')" >>"$RESULTS"
      STATUS=1
    fi
  done
}

# Untimed load on every system before any measurement, so that the JVM's JIT
# has compiled ZooKeeper's hot paths (a fresh ZooKeeper is several times
# slower for its first seconds) and both systems start from a warm state.
prime_systems() {
  local sys
  for sys in "${ACTIVE[@]}"; do
    log "priming $sys (${PRIME}s create, ${PRIME}s mix, not measured)"
    zkbench --servers "$(connect_of "$sys")" --op create --duration "$PRIME" --warmup 0 \
      --label "$sys-prime" >/dev/null || true
    zkbench --servers "$(connect_of "$sys")" --op mix --duration "$PRIME" --warmup 0 \
      --label "$sys-prime" >/dev/null || true
  done
}

# ensure_up SYSTEM: restart any server that is no longer running (something
# outside this script may have killed it) and record that it happened.
ensure_up() {
  local sys=$1 script dir i
  script=$(cluster_script "$sys") dir=$TMP/$sys
  for i in 1 2 3; do
    if ! "$script" pid "$dir" "$i" >/dev/null 2>&1; then
      log "$sys server $i is not running (killed from outside?); restarting it"
      printf '{"system":"%s","workload":"event","round":0,"error":"server %s was found dead before a run and restarted"}\n' \
        "$sys" "$i" >>"$RESULTS"
      "$script" restart "$dir" "$i" >/dev/null 2>&1 || true
    fi
  done
  "$script" wait "$dir" 60 >/dev/null 2>&1 || log "$sys is not ready"
}

run_load() {
  local workload=$1 round sys out args
  case "$workload" in
    sync) args=(--sync --op set) ;;
    *) args=(--op "$workload" --sessions "$SESSIONS" --inflight "$INFLIGHT") ;;
  esac
  for round in $(seq 1 "$ROUNDS"); do
    for sys in "${ACTIVE[@]}"; do
      ensure_up "$sys"
      log "$workload round $round: $sys"
      out=$(zkbench --servers "$(connect_of "$sys")" "${args[@]}" --value-bytes "$VALUE_BYTES" \
        --duration "$DURATION" --warmup "$WARMUP" --label "$sys") || true
      record "$sys" "$workload" "$round" "$out"
    done
  done
}

run_failover() {
  local round sys script dir leader pid out
  for round in $(seq 1 "$FAILOVERS"); do
    for sys in "${ACTIVE[@]}"; do
      script=$(cluster_script "$sys") dir=$TMP/$sys
      ensure_up "$sys"
      if ! "$script" wait "$dir" 60 2>>"$TMP/zkbench.log" || ! leader=$("$script" leader "$dir") ||
         ! pid=$("$script" pid "$dir" "$leader"); then
        log "failover round $round: $sys has no leader"
        record "$sys" failover "$round" ""
        continue
      fi
      log "failover round $round: $sys, killing leader $leader (pid $pid)"
      out=$(zkbench --servers "$(connect_of "$sys")" --failover-kill "$pid" --warmup 2 \
        --duration 60 --label "$sys") || true
      record "$sys" failover "$round" "$out" ",\"killed_server\":$leader"
      while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
      "$script" restart "$dir" "$leader"
      "$script" wait "$dir" 120 || log "$sys did not recover after restarting server $leader"
    done
  done
}

# jvm_heap_used_kib PID...: live heap after a full GC, one number per pid.
jvm_heap_used_kib() {
  local pid used out=""
  for pid in "$@"; do
    used=-1
    if command -v jcmd >/dev/null && jcmd "$pid" GC.run >/dev/null 2>&1; then
      used=$(jcmd "$pid" GC.heap_info 2>/dev/null |
        awk '/heap/ && /used/ { for (i = 1; i < NF; i++) if ($i == "used") { sub(/K,?$/, "", $(i + 1)); print $(i + 1); exit } }')
      [ -n "$used" ] || used=-1
    fi
    out+="${out:+,}$used"
  done
  echo "[$out]"
}

rss_kib() {
  local pid out=""
  for pid in "$@"; do out+="${out:+,}$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo -1)"; done
  echo "[$out]"
}

# RSS is sampled here, not by zkbench --rss-pids, so that the full GC that
# measures ZooKeeper's live heap happens after the "before" sample and after
# the "after" sample: both RSS samples see the JVM as it runs on its own.
run_memory() {
  local sys script dir pids=() i out extra rss_before
  for sys in "${ACTIVE[@]}"; do
    script=$(cluster_script "$sys") dir=$TMP/$sys
    ensure_up "$sys"
    pids=()
    for i in 1 2 3; do pids+=("$("$script" pid "$dir" "$i" || echo 0)"); done
    rss_before=$(rss_kib "${pids[@]}")
    extra=",\"rss_kib_before\":$rss_before"
    if [[ "$sys" == zookeeper* ]]; then
      extra+=",\"jvm_heap_used_kib_before\":$(jvm_heap_used_kib "${pids[@]}")"
    fi
    log "memory: loading $ZNODES znodes of $VALUE_BYTES B into $sys"
    out=$(zkbench --servers "$(connect_of "$sys")" --op create --ops "$ZNODES" --multi 100 \
      --sessions 4 --inflight 8 --value-bytes "$VALUE_BYTES" --prefix /keel-bench-mem \
      --label "$sys") || true
    sleep 5
    extra+=",\"rss_kib_after\":$(rss_kib "${pids[@]}")"
    if [[ "$sys" == zookeeper* ]]; then
      extra+=",\"jvm_heap_used_kib_after\":$(jvm_heap_used_kib "${pids[@]}")"
      extra+=",\"rss_kib_after_full_gc\":$(rss_kib "${pids[@]}")"
    fi
    record "$sys" memory 1 "$out" "$extra"
  done
}

log "results and logs in $TMP"
python3 "$ROOT/bench/report.py" probe "$TMP" --note "${BENCH_NOTE:-}" >"$TMP/machine.json"
start_systems
[ ${#ACTIVE[@]} -gt 0 ] || log "no system came up; nothing to measure"
prime_systems
IFS=, read -r -a workloads <<<"$WORKLOADS"
for w in "${workloads[@]}"; do
  [ ${#ACTIVE[@]} -gt 0 ] || break
  case "$w" in
    create|set|get|mix|sync) run_load "$w" ;;
    failover) run_failover ;;
    memory) run_memory ;;
    *) log "unknown workload $w"; STATUS=2 ;;
  esac
done

options=$(printf '{"quick":%s,"prime_s":%s,"rounds":%s,"duration_s":%s,"warmup_s":%s,"znodes":%s,"failovers":%s,"sessions":%s,"inflight":%s,"value_bytes":%s,"systems":"%s","zk_jvm_opts":"%s"}' \
  "$([ "$QUICK" = 1 ] && echo true || echo false)" "$PRIME" "$ROUNDS" "$DURATION" "$WARMUP" "$ZNODES" \
  "$FAILOVERS" "$SESSIONS" "$INFLIGHT" "$VALUE_BYTES" "$SYSTEMS" "${ZK_JVM_OPTS:--Xmx2g -XX:+UseG1GC}")
python3 "$ROOT/bench/report.py" report --results "$RESULTS" --machine "$TMP/machine.json" \
  --options "$options" --out "$OUT"
log "wrote $OUT/latest.md, latest.json, compare.png"
exit "$STATUS"
