#!/usr/bin/env bash
# keel-cluster.sh — start and stop a local N-node keel cluster on loopback,
# with the same commands as scripts/zk-ensemble.sh so that bench/compare.sh
# drives keel and Apache ZooKeeper the same way.
#
#   keel-cluster.sh start N BASEDIR [--base-port P]
#       Starts N `keel server` processes (data in BASEDIR/keelI/data), waits
#       until every one serves and one is leader, prints the connect string.
#       Ports: server i uses client P+3(i-1), peer +1, metrics +2; without
#       --base-port a free block is picked at random in 21000-32000.
#   keel-cluster.sh stop BASEDIR          TERM every server, KILL after 10 s
#   keel-cluster.sh connect BASEDIR       print the connect string
#   keel-cluster.sh status BASEDIR        one line per server: ID PID PORT MODE
#   keel-cluster.sh leader BASEDIR        print the id of the leader (exit 1: none)
#   keel-cluster.sh pid BASEDIR ID        print the server's pid
#   keel-cluster.sh port BASEDIR ID       print the server's client port
#   keel-cluster.sh kill BASEDIR ID [SIG] send SIG (default KILL) to one server
#   keel-cluster.sh restart BASEDIR ID    start one (stopped) server again,
#                                         on its existing data directory
#   keel-cluster.sh wait BASEDIR [SECS]   wait until every running server
#                                         serves and there is one leader
#
# Every cluster gets its own secret, BASEDIR/cluster.secret (made at start,
# mode 0600), for the peer handshake and for operators (docs/security.md).
#
# A server's role comes from the `srvr` four-letter word on its client port
# (the `Mode: leader|follower` line), exactly as for ZooKeeper.
#
# Environment: KEEL (default: build/keel of this checkout), KEEL_ARGS (extra
# `keel server` flags, e.g. "--log-level warn"), KEEL_START_TIMEOUT (seconds,
# default 30).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KEEL=${KEEL:-$ROOT/build/keel}
KEEL_ARGS=${KEEL_ARGS:-}
KEEL_START_TIMEOUT=${KEEL_START_TIMEOUT:-30}

die() { echo "keel-cluster: $*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null &&
    ! ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}

# pick_base_port N: 3N consecutive free ports between 21000 and 32000, below
# the ephemeral range (see scripts/zk-ensemble.sh, which uses 10000-21000).
pick_base_port() {
  local n=$1 base p ok
  for _ in $(seq 1 50); do
    base=$((21000 + (RANDOM % 1100) * 10))
    ok=1
    for p in $(seq "$base" $((base + 3 * n - 1))); do
      port_free "$p" || { ok=0; break; }
    done
    [ "$ok" = 1 ] && { echo "$base"; return 0; }
  done
  die "no free block of $((3 * n)) ports found"
}

four_letter() {
  # shellcheck disable=SC2016  # expanded by the inner shell
  timeout 3 bash -c '
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "%s" "$2" >&3
    cat <&3' _ "$1" "$2" 2>/dev/null || true
}

load_state() {
  [ -f "$1/cluster.env" ] || die "$1: no keel cluster here (missing cluster.env)"
  # shellcheck disable=SC1090,SC1091
  . "$1/cluster.env"
}

client_port() { echo $((BASE_PORT + 3 * ($1 - 1))); }

server_pid() {
  local f="$DIR/keel$1/pid" pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$DIR/keel$1/data" || return 1
  echo "$pid"
}

server_mode() {
  four_letter "$(client_port "$1")" srvr | sed -n 's/^Mode: //p'
}

connect_string() {
  local i s=""
  for i in $(seq 1 "$N"); do s+="${s:+,}127.0.0.1:$(client_port "$i")"; done
  echo "$s"
}

cluster_flag() {
  local i s=""
  for i in $(seq 1 "$N"); do s+="${s:+,}$i=127.0.0.1:$(($(client_port "$i") + 1))"; done
  echo "$s"
}

start_server() {
  local i=$1 sdir="$DIR/keel$1" port
  server_pid "$i" >/dev/null && die "server $i is already running"
  mkdir -p "$sdir/data"
  port=$(client_port "$i")
  # shellcheck disable=SC2086  # KEEL_ARGS is a list of words
  setsid "$KEEL" server --id "$i" --data-dir "$sdir/data" \
    --listen "127.0.0.1:$port" --peer-listen "127.0.0.1:$((port + 1))" \
    --metrics-listen "127.0.0.1:$((port + 2))" --cluster "$(cluster_flag)" \
    --cluster-secret-file "$DIR/cluster.secret" --maxClientCnxns 0 $KEEL_ARGS \
    </dev/null >>"$sdir/server.log" 2>&1 &
  echo $! >"$sdir/pid"
}

wait_ready() {
  local secs=${1:-60} deadline i mode leaders serving running
  deadline=$((SECONDS + secs))
  while :; do
    leaders=0 serving=0 running=0
    for i in $(seq 1 "$N"); do
      server_pid "$i" >/dev/null || continue
      running=$((running + 1))
      mode=$(server_mode "$i")
      case "$mode" in
        leader|standalone) leaders=$((leaders + 1)); serving=$((serving + 1)) ;;
        follower|observer) serving=$((serving + 1)) ;;
      esac
    done
    if [ "$running" -gt 0 ] && [ "$serving" = "$running" ] && [ "$leaders" = 1 ]; then
      return 0
    fi
    [ "$SECONDS" -ge "$deadline" ] && break
    sleep 0.2
  done
  echo "keel-cluster: not ready after ${secs}s ($serving/$running serving, $leaders leader(s)); logs in $DIR/keel*/server.log" >&2
  return 1
}

stop_all() {
  local i pid pids=() deadline
  for i in $(seq 1 "$N"); do
    pid=$(server_pid "$i") || continue
    kill -TERM "$pid" 2>/dev/null || true
    pids+=("$pid")
  done
  deadline=$((SECONDS + 10))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  for i in $(seq 1 "$N"); do rm -f "$DIR/keel$i/pid"; done
}

cmd_start() {
  [ $# -ge 2 ] || usage
  N=$1 DIR=$2
  shift 2
  local base="" i
  while [ $# -gt 0 ]; do
    case "$1" in
      --base-port) base=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  [[ "$N" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number"
  [ -x "$KEEL" ] || die "$KEEL not found (run make)"
  mkdir -p "$DIR"
  DIR=$(cd "$DIR" && pwd)
  if [ -f "$DIR/cluster.env" ] && (load_state "$DIR" && for i in $(seq 1 "$N"); do server_pid "$i"; done | grep -q .); then
    die "$DIR: a cluster is running there"
  fi
  [ -n "$base" ] || base=$(pick_base_port "$N")
  BASE_PORT=$base
  printf 'N=%s\nBASE_PORT=%s\nDIR=%q\n' "$N" "$BASE_PORT" "$DIR" >"$DIR/cluster.env"
  for i in $(seq 1 "$N"); do
    port_free "$(client_port "$i")" || die "port $(client_port "$i") is in use"
  done
  if [ ! -s "$DIR/cluster.secret" ]; then
    (umask 077 && "$KEEL" secret generate >"$DIR/cluster.secret")
  fi
  for i in $(seq 1 "$N"); do start_server "$i"; done
  wait_ready "$KEEL_START_TIMEOUT" || { stop_all; exit 1; }
  connect_string
}

main() {
  [ $# -ge 1 ] || usage
  local cmd=$1 i pid
  shift
  case "$cmd" in
    start) cmd_start "$@" ;;
    stop)
      [ $# -eq 1 ] || usage
      [ -f "$1/cluster.env" ] || exit 0
      load_state "$1"; stop_all ;;
    connect) [ $# -eq 1 ] || usage; load_state "$1"; connect_string ;;
    status)
      [ $# -eq 1 ] || usage
      load_state "$1"
      for i in $(seq 1 "$N"); do
        pid=$(server_pid "$i") || pid=-
        echo "$i $pid $(client_port "$i") $(server_mode "$i")"
      done ;;
    leader)
      [ $# -eq 1 ] || usage
      load_state "$1"
      for i in $(seq 1 "$N"); do
        case "$(server_mode "$i")" in leader|standalone) echo "$i"; return 0 ;; esac
      done
      return 1 ;;
    pid) [ $# -eq 2 ] || usage; load_state "$1"; server_pid "$2" ;;
    port) [ $# -eq 2 ] || usage; load_state "$1"; client_port "$2" ;;
    kill)
      [ $# -ge 2 ] || usage
      load_state "$1"
      pid=$(server_pid "$2") || die "server $2 is not running"
      kill -"${3:-KILL}" "$pid" ;;
    restart) [ $# -eq 2 ] || usage; load_state "$1"; start_server "$2" ;;
    wait) [ $# -ge 1 ] || usage; load_state "$1"; wait_ready "${2:-60}" ;;
    *) usage ;;
  esac
}

main "$@"
