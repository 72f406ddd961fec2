#!/usr/bin/env bash
# The pure layers (src/base raft zk meta kafka plog group broker core sasl) must not reach for I/O, a clock,
# randomness or mutable global state. Two checks:
#  1. sources: no forbidden #include, no call of a clock/random function;
#  2. objects (when a build dir is given): nm shows no undefined reference to
#     I/O, clock, thread or libuv symbols, and no writable global data.
# Usage: check-pure.sh SOURCE_DIR [BUILD_DIR]
set -euo pipefail
src=${1:?source dir}
build=${2:-}
layers=(base raft zk meta kafka plog group broker core sasl)
status=0

check_sources() { # label files...
  local label=$1; shift
  if hits=$(grep -nE '#[[:space:]]*include[[:space:]]*<(uv\.h|stdio\.h|unistd\.h|pthread\.h|sys/[a-z_]+\.h|fcntl\.h|time\.h|threads\.h|dirent\.h|signal\.h)>' "$@" 2>/dev/null); then
    echo "check-pure: forbidden include in $label:"; echo "$hits"; status=1
  fi
  if hits=$(grep -nE '\b(time|rand|random|srand|gettimeofday|clock_gettime|clock|getrandom|getpid|malloc_trim)[[:space:]]*\(' "$@" 2>/dev/null | grep -vE '^\S+:[0-9]+:\s*(\*|/\*|//)'); then
    echo "check-pure: clock or randomness in $label:"; echo "$hits"; status=1
  fi
  # A pure file includes only pure headers of its own project (and the
  # vfs interface, through which plog's file I/O is injected).
  if hits=$(grep -nE '#[[:space:]]*include[[:space:]]*"(os|net|wal|node|cli|client)/' "$@" 2>/dev/null | grep -vE '"wal/vfs\.h"'); then
    echo "check-pure: I/O-layer header in $label:"; echo "$hits"; status=1
  fi
}

for l in "${layers[@]}"; do
  d="$src/src/$l"
  [ -d "$d" ] || continue
  check_sources "src/$l" "$d"/*.[ch]
done

if [ -n "$build" ]; then
  forbidden='^(open|open64|openat|close|read|write|pread|pread64|pwrite|pwrite64|fsync|fdatasync|fopen|fclose|fwrite|fread|printf|fprintf|puts|putchar|perror|time|clock|clock_gettime|gettimeofday|rand|random|srand|getrandom|pthread_.*|uv_.*|socket|connect|send|recv|sleep|usleep|nanosleep|exit|getenv)$'
  for l in "${layers[@]}"; do
    lib=$(find "$build" -name "libkeel_$l.a" -print -quit)
    [ -n "$lib" ] || continue
    if bad=$(nm -u "$lib" 2>/dev/null | awk '{print $2}' | sed 's/@.*//' | grep -E "$forbidden" | sort -u); then
      echo "check-pure: libkeel_$l.a references: $(echo $bad)"; status=1
    fi
    # Writable globals: objects in .data/.bss (not .data.rel.ro, which is
    # read-only after relocation), minus sanitizer/coverage bookkeeping.
    bad=$(objdump -t "$lib" 2>/dev/null | awk '$0 ~ / O / {print $(NF-2), $NF}' \
          | awk '$1 ~ /^\.(data|bss|tdata|tbss)(\.|$)/ && $1 !~ /^\.data\.rel\.ro/ {print $2}' \
          | grep -vE '^(__(asan|ubsan|sancov|llvm|gcov|profc|profd|odr_asan)|___asan|__unnamed_[0-9]+|\.L)' | sort -u || true)
    if [ -n "$bad" ]; then
      echo "check-pure: libkeel_$l.a has writable globals: $(echo $bad)"; status=1
    fi
  done
fi

[ $status -eq 0 ] && echo "check-pure: pure layers are pure"
exit $status
