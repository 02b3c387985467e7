#!/usr/bin/env bash
# One file on every core gives the serial answer: `rankscope analyze --json` with the split
# forced on (every file cut into many small pieces, 2 and 3 threads) must be byte for byte the
# answer with it off (RANKSCOPE_PARSE_THREADS=1), on every real trace under shared/traces (each
# gzip file also unzipped, each plain file also gzipped, so both paths see every trace), on
# every multi-file folder analyzed as a job, and on synth ranks.
#
#   tests/split/same_answer.sh [RANKSCOPE_BINARY] [EXTRA_FILE...]
#
# EXTRA_FILE: more traces to check the same way (the 400 MB synth file of BENCHMARKS.md).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$here/target/release/rankscope}
shift || true
traces=${TRACES:-$here/../shared/traces}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
checked=0

run() { # run ENV... -- PATHS...
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$bin" analyze --json "$@" 2>/dev/null || true
}

check() { # check LABEL PATH...
  local label=$1; shift
  run RANKSCOPE_PARSE_THREADS=1 -- "$@" > "$tmp/serial.json"
  for t in 2 3; do
    for block in 16384 65536 1048576; do
      run RANKSCOPE_PARSE_THREADS=$t RANKSCOPE_SPLIT_MIN_BYTES=0 RANKSCOPE_CUT_BLOCK_BYTES=$block -- "$@" > "$tmp/split.json"
      if ! cmp -s "$tmp/serial.json" "$tmp/split.json"; then
        echo "DIFF  $label (threads $t, pieces of $block bytes)"
        fail=1
      fi
    done
  done
  # The default thresholds and threads, as a user runs it.
  run -- "$@" > "$tmp/split.json"
  if ! cmp -s "$tmp/serial.json" "$tmp/split.json"; then
    echo "DIFF  $label (defaults)"
    fail=1
  fi
  checked=$((checked + 1))
}

n=0
while IFS= read -r f; do
  n=$((n + 1))
  check "$f" "$f"
  case "$f" in
    *.gz) gzip -dc "$f" > "$tmp/$n.json"; check "$f (unzipped)" "$tmp/$n.json" ;;
    *) gzip -c "$f" > "$tmp/$n.json.gz"; check "$f (gzipped)" "$tmp/$n.json.gz" ;;
  esac
  rm -f "$tmp/$n.json" "$tmp/$n.json.gz"
done < <(find "$traces" -name '*.json*' -type f | sort)

# Folders of several traces, analyzed as a job.
while IFS= read -r d; do
  if [ "$(find "$d" -maxdepth 1 -name '*.json*' -type f | wc -l)" -gt 1 ]; then
    check "$d (job)" "$d"
  fi
done < <(find "$traces" -type d | sort)

# Synth ranks: each alone, plain and gzip, and the job.
"$bin" synth --ranks 2 --steps 6 --out "$tmp/synth" > /dev/null
for f in "$tmp"/synth/rank*.pt.trace.json; do
  check "synth $(basename "$f")" "$f"
  gzip -c "$f" > "$f.gz"
  check "synth $(basename "$f").gz" "$f.gz"
  rm -f "$f.gz"
done
check "synth (job)" "$tmp/synth"

for f in "$@"; do
  check "$f" "$f"
done

echo "$checked inputs checked; $([ $fail = 0 ] && echo 'all byte for byte the serial answer' || echo 'DIFFERENCES above')"
exit $fail
