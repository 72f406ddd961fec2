#!/bin/sh
# expect-violation.sh SIM CHECKER NODES FIRST:COUNT [FLAGS...] — runs a
# planted-bug build on seeds FIRST, FIRST+1, ... and passes at the first
# seed whose FAIL line names CHECKER (e.g. "fifo", "watch order"): the
# checker meant to catch the bug did, within COUNT seeds. A seed that
# fails by another checker is reported and the search goes on.
set -u
sim=$1
checker=$2
nodes=$3
first=${4%%:*}
count=${4##*:}
shift 4
seed=$first
last=$((first + count - 1))
while [ "$seed" -le "$last" ]; do
  out=$("$sim" --seed "$seed" --nodes "$nodes" "$@" 2>&1)
  rc=$?
  line=$(printf '%s\n' "$out" | grep "^FAIL seed=$seed " | head -n 1)
  if [ "$rc" -ne 0 ] && [ -n "$line" ]; then
    case $line in
      *": zk: $checker:"*)
        echo "seed $seed ($nodes nodes): caught by $checker: ${line#*: zk: $checker: }"
        exit 0 ;;
      *) echo "seed $seed ($nodes nodes): failed, not by $checker: ${line##*: zk: }" ;;
    esac
  elif [ "$rc" -ne 0 ]; then
    printf '%s\n' "$out" | tail -n 5
    echo "seed $seed ($nodes nodes): exit $rc without a FAIL line" >&2
    exit 1
  fi
  seed=$((seed + 1))
done
echo "no seed in $first..$last ($nodes nodes) was caught by $checker" >&2
exit 1
