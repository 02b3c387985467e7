#!/usr/bin/env bash
# One file on every core against one core: `rankscope analyze --json FILE` with
# RANKSCOPE_PARSE_THREADS=1 and with the defaults, interleaved, ROUNDS times, for each binary
# and file given; wall, CPU (user + sys) and peak RSS from /usr/bin/time, the 1-minute load
# average before each run.
#
#   tests/split/bench.sh ROUNDS "BIN..." FILE...
set -euo pipefail
rounds=$1; bins=$2; shift 2
for r in $(seq "$rounds"); do
  for f in "$@"; do
    for b in $bins; do
      for t in 1 default; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        if [ $t = 1 ]; then e=(env RANKSCOPE_PARSE_THREADS=1); else e=(env); fi
        m=$( { /usr/bin/time -f "%e %U %S %M" "${e[@]}" "$b" analyze --json "$f" > /dev/null; } 2>&1 | tail -1)
        read -r wall user sys rss <<< "$m"
        printf "round %s  %-28s %-14s threads=%-7s load %5s  %5.2f s wall  %5.2f s CPU  %4d MB\n" \
          "$r" "$(basename "$b")" "$(basename "$f")" "$t" "$load" "$wall" "$(echo "$user + $sys" | bc)" "$((rss / 1000))"
      done
    done
  done
done
