#!/bin/bash
# Builds the libFuzzer targets (tests/fuzz) with clang in build-fuzz/ and
# runs each for a bounded time, starting from its seed corpus in
# tests/fuzz/corpus/<target>. Fails on the first crash, leak, timeout or
# sanitizer report, and names the input that caused it.
#
# usage: tests/fuzz/run.sh [--seconds N] [--jobs J] [--opt L] [TARGET...]
#   --seconds N  fuzzing time per target (default: $STOKER_FUZZ_SECONDS, or
#                20); 0 only replays the seed corpus
#   --jobs J     targets run at once (default: the number of cores)
#   --opt L      the build's optimization level, -OL (default:
#                $STOKER_FUZZ_OPT, or 1). 0 builds in two thirds of the
#                time and runs a tenth to two thirds as many inputs a
#                second: what tests/run.sh uses for CI's short runs
#                (docs/testing.md)
#
# New inputs the fuzzer finds go to build-fuzz/corpus/<target>, not into
# the tree. A crashing input is left in build-fuzz/artifacts/; once the bug
# is fixed, copy it into tests/fuzz/corpus/<target>/crash-<what> so every
# later run replays it.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${STOKER_FUZZ_SECONDS:-20}
OPT=${STOKER_FUZZ_OPT:-1}
JOBS=$(nproc)
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --opt) OPT=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "unknown flag $1" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
[ ${#TARGETS[@]} -eq 0 ] &&
  TARGETS=(fuzz_record fuzz_manifest fuzz_config fuzz_request fuzz_jpeg fuzz_image
           fuzz_tar fuzz_tfrecord fuzz_pickle fuzz_msgpack fuzz_npy fuzz_payload)

case "$OPT" in
  0|1|2) ;;
  *) echo "--opt must be 0, 1 or 2, not $OPT" >&2; exit 2 ;;
esac

BUILD=build-fuzz
# -O1 (or -O0) and line tables only: quicker to build, and stack traces
# still name the file and line.
cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKER_WERROR=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O$OPT -gline-tables-only" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O$OPT -gline-tables-only" \
  -DSTOKER_FUZZ=ON -DSTOKER_BUILD_TESTS=OFF >/dev/null
cmake --build $BUILD -j"$(nproc)" --target "${TARGETS[@]}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# fuzz TARGET: replays the seeds, then fuzzes for SECONDS_EACH seconds.
fuzz() {
  local t=$1 seeds=tests/fuzz/corpus/$1 work=$BUILD/corpus/$1
  local log=$BUILD/logs/$t.log
  mkdir -p "$work" $BUILD/artifacts $BUILD/logs
  local args=(-timeout=10 -rss_limit_mb=2048 -max_len=65536
              -print_final_stats=1 -artifact_prefix=$BUILD/artifacts/$t-)
  if ! $BUILD/tests/fuzz/$t "${args[@]}" -runs=0 "$seeds" >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "FAIL $t: a seed in $seeds fails; see $log" >&2
    return 1
  fi
  if [ "$SECONDS_EACH" -gt 0 ] &&
     ! $BUILD/tests/fuzz/$t "${args[@]}" -max_total_time="$SECONDS_EACH" \
         "$work" "$seeds" >>"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "FAIL $t: see $log and the input in $BUILD/artifacts/" >&2
    return 1
  fi
  echo "ok   $t: $(grep -E '^stat::number_of_executed_units' "$log" |
    tail -1 | awk '{print $2}') runs in ${SECONDS_EACH} s," \
    "$(ls "$work" | wc -l) corpus entries"
}

pids=() failed=0
for t in "${TARGETS[@]}"; do
  fuzz "$t" & pids+=($!)
  if [ ${#pids[@]} -ge "$JOBS" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ $failed -eq 0 ] || { echo "fuzzing found a failure" >&2; exit 1; }
echo "fuzzing: every target ran ${SECONDS_EACH} s without a failure"
