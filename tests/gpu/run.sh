#!/bin/bash
# The checks that need a GPU, run on a GPU machine from a build made on
# another one: the GPU machine builds nothing (it may have no compiler and
# no package registry, and another distribution).
#
#   tests/gpu/run.sh pack [BUILD [BUNDLE]]   on the build machine
#       Copies the GPU test binaries and stokerd from BUILD (default build/,
#       configured with CUDA on) into BUNDLE (default build-gpu/, ignored
#       by git), with every shared library ldd finds for them except the
#       NVIDIA driver's, and this machine's glibc (its loader, libc, libm)
#       for a GPU machine whose glibc is older; strips debug info; packs it
#       as BUNDLE.tar.gz, what travels, and fails when that is 64 MiB or
#       more. BUNDLE/NEEDS_GLIBC holds the newest GLIBC_ symbol version the
#       binaries ask for.
#
#   tests/gpu/run.sh run [BUNDLE]            on the GPU machine
#       BUNDLE: the directory or its .tar.gz (default build-gpu.tar.gz).
#       Needs nvidia-smi and a GPU; exits 2 saying so when there is none.
#       Runs every binary through BUNDLE's libraries (and, where this
#       machine's glibc is older than NEEDS_GLIBC, through BUNDLE's glibc),
#       then: stokerd --version must list every GPU nvidia-smi lists; the
#       GPU gtests must pass with nothing skipped; torch (if python3 has it)
#       must see the same GPU UUIDs. Writes the log to $OUT/gpu-run.log
#       when OUT is set. Exit 0 when every check passed, 1 when one failed.
#
#   tests/gpu/run.sh exec BUNDLE BINARY [ARGS]   anywhere
#       Starts one bundled binary as `run` would (tests/python/
#       test_gpu_script.py checks the bundle with it on the build machine).
#
# The exact commands are in docs/testing.md ("GPU checks").
set -euo pipefail

# Binaries the bundle carries: the daemon, and the tests that need a GPU
# (or check, with one, what they skip without).
BINARIES=(
  server/stokerd
  tests/cuda/cuda_probe_test
  tests/transport/device_normalize_gpu_test
  tests/transport/device_normalize_test
  tests/transport/cuda_ipc_test
  tests/transport/device_ring_memory_gpu_test
  tests/transport/device_outputs_test
  tests/integration/integration_cuda_ipc_gpu_test
)
# Tests that must not skip on a GPU machine.
GPU_TESTS=(cuda_probe_test device_normalize_gpu_test device_ring_memory_gpu_test cuda_ipc_test
           device_normalize_test device_outputs_test integration_cuda_ipc_gpu_test)
LIMIT_BYTES=$((64 * 1024 * 1024))
# Images of the packed dataset: 3 batches of 256 an epoch.
DATASET_IMAGES=768
# glibc's own libraries: taken from the GPU machine when its glibc is new
# enough, else from BUNDLE/glibc.
GLIBC_LIBS='^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2)$'
# The driver's libraries are the GPU machine's, never carried.
DRIVER_LIBS='^(libcuda\.so|libnvidia-)'

die() { echo "tests/gpu/run.sh: $*" >&2; exit 1; }
REPO=$(cd "$(dirname "$0")/../.." && pwd)

pack() {
  local build=${1:-build} bundle=${2:-build-gpu}
  [ -f "$build/CMakeCache.txt" ] || die "no build in $build (configure and build it first)"
  grep -q '^STOKER_CUDA_SUPPORT:INTERNAL=ON$' "$build/CMakeCache.txt" \
    || die "$build was configured without CUDA (STOKER_CUDA=OFF, or no toolkit): configure with -DSTOKER_CUDA=ON"
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/glibc"
  local b
  for b in "${BINARIES[@]}"; do
    [ -x "$build/$b" ] || die "$build/$b is missing: build it first (cmake --build $build)"
    cp "$build/$b" "$bundle/bin/"
  done
  # Every library the binaries load, as this machine resolves them.
  local lib name
  for b in "$bundle"/bin/*; do
    ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
  done | sort -u | while read -r lib; do
    name=$(basename "$lib")
    if [[ $name =~ $DRIVER_LIBS ]]; then continue; fi
    if [[ $name =~ $GLIBC_LIBS ]]; then
      cp -L "$lib" "$bundle/glibc/$name"
    else
      cp -L "$lib" "$bundle/lib/$name"
    fi
  done
  if ldd "$bundle"/bin/* | grep -q 'not found'; then
    die "ldd finds no file for: $(ldd "$bundle"/bin/* | grep 'not found' | sort -u | tr '\n' ' ')"
  fi
  # The loader, whichever path the binaries name it by.
  cp -L /lib64/ld-linux-x86-64.so.2 "$bundle/glibc/"
  chmod u+w "$bundle"/bin/* "$bundle"/lib/* "$bundle"/glibc/*
  strip --strip-debug "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null || true
  # The newest glibc symbol version anything outside glibc asks for.
  objdump -T "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null \
    | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1 \
    > "$bundle/NEEDS_GLIBC"
  # The dataset the stream checks and the benchmark read: synthetic photos
  # (bench/make_images.py needs PIL, which the GPU machine may lack), packed
  # by this build's `stoker pack`.
  [ -x "$build/client/cli/stoker" ] || die "$build/client/cli/stoker is missing: build it first"
  local images
  images=$(mktemp -d "${TMPDIR:-/tmp}/stoker-gpu-images.XXXXXX")
  /usr/bin/python3 bench/make_images.py "$images" --count "$DATASET_IMAGES" \
    --classes 10 --min-size 256 --max-size 320 --quality 85 >/dev/null
  mkdir -p "$bundle/data"
  "$build/client/cli/stoker" pack "$images" "$bundle/data/bench" --shards 4 >/dev/null
  rm -rf "$images"
  {
    echo "built on: $(uname -n) $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(getconf GNU_LIBC_VERSION | awk '{print $2}')"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "date: $(date -u +%FT%TZ)"
  } > "$bundle/BUILT"
  # What travels is the tarball (gzip: every machine can unpack it).
  tar czf "$bundle.tar.gz" -C "$(dirname "$bundle")" "$(basename "$bundle")"
  local bytes packed
  bytes=$(du -sb "$bundle" | awk '{print $1}')
  packed=$(stat -c %s "$bundle.tar.gz")
  if [ "$packed" -ge "$LIMIT_BYTES" ]; then
    du -ab "$bundle" | sort -rn | head -8 >&2
    die "$bundle.tar.gz is $packed bytes, over the 64 MiB a device run may carry"
  fi
  echo "tests/gpu/run.sh: packed $bundle.tar.gz: $(ls "$bundle/bin" | wc -l) binaries, $(ls "$bundle/lib" | wc -l) libraries, $((bytes / 1024 / 1024)) MiB unpacked, $((packed / 1024 / 1024)) MiB packed; needs glibc $(cat "$bundle/NEEDS_GLIBC")"
}

# Sets RUN: how to start a bundled binary on this machine. With
# STOKER_GPU_BUNDLED_GLIBC=1, through the bundle's glibc whatever this
# machine's is (to test that path on the build machine).
choose_runner() {
  local bundle=$1 have need driver_dir
  have=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
  need=$(cat "$bundle/NEEDS_GLIBC")
  driver_dir=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / {print $NF; exit}' | xargs -r dirname)
  if [ "${STOKER_GPU_BUNDLED_GLIBC:-0}" != 1 ] &&
     [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" = "$need" ]; then
    echo "glibc $have here, the bundle needs $need: its binaries run on this machine's glibc"
    RUN=(env "LD_LIBRARY_PATH=$bundle/lib${driver_dir:+:$driver_dir}")
  else
    echo "glibc $have here, the bundle needs $need: its binaries run on the bundle's glibc"
    RUN=("$bundle/glibc/ld-linux-x86-64.so.2" --library-path "$bundle/glibc:$bundle/lib${driver_dir:+:$driver_dir}")
  fi
}

FAILED=()
check() {  # check NAME COMMAND...: runs it, logs, records a failure.
  local name=$1; shift
  echo "== $name"
  if "$@"; then echo "-- $name: passed"; else echo "-- $name: FAILED"; FAILED+=("$name"); fi
}

gtest() {
  local test=$1 out
  out=$(timeout 120 "${RUN[@]}" "$BUNDLE/bin/$test" 2>&1) || { echo "$out" | tail -40; return 1; }
  echo "$out" | grep -E '^\[  (PASSED|SKIPPED|FAILED) ' || true
  if echo "$out" | grep -q '^\[  SKIPPED \]'; then
    echo "$out" | grep -A2 'Skipped$\|SKIPPED \]' | head -20
    echo "$test skipped tests on a GPU machine"
    return 1
  fi
}

gpu_uuids() { nvidia-smi -L | grep -o 'GPU-[0-9a-f-]*' | sort; }

version_lists_gpus() {
  local version
  version=$("${RUN[@]}" "$BUNDLE/bin/stokerd" --version)
  echo "$version"
  echo "$version" | grep -q '^CUDA: built' || { echo "stokerd was built without CUDA"; return 1; }
  local uuid missing=0
  for uuid in $(gpu_uuids); do
    echo "$version" | grep -q "$uuid" || { echo "stokerd does not list $uuid"; missing=1; }
  done
  return $missing
}

torch_sees_the_gpus() {
  if ! python3 -c 'import torch' 2>/dev/null; then
    echo "python3 has no torch here: nothing to compare"
    return 0
  fi
  local from_torch
  from_torch=$(python3 - <<'PY'
import torch
print(f"# torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"{torch.cuda.device_count()} GPU(s)", flush=True)
for i in range(torch.cuda.device_count()):
    # torch prints the UUID without nvidia-smi's "GPU-"; stokerd takes both.
    print(f"GPU-{torch.cuda.get_device_properties(i).uuid}")
PY
)
  echo "$from_torch" | grep '^#'
  [ "$(echo "$from_torch" | grep -v '^#' | sort)" = "$(gpu_uuids)" ] \
    || { echo "torch's UUIDs differ from nvidia-smi's:"; echo "$from_torch"; gpu_uuids; return 1; }
}

# The stream checks: the bundled stokerd on the bundled dataset, the
# Python client from this checkout (client/python) on this machine's torch.
DAEMON_PID=
start_daemon() {
  echo "== stokerd from the bundle"
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/stoker-gpu-run.XXXXXX")
  SOCKET=$WORK/stoker.sock
  METRICS_PORT=$((20000 + RANDOM % 20000))
  cat > "$WORK/stoker.yaml" <<EOF
listen: {unix: $SOCKET}
workers: $(( $(nproc) > 2 ? $(nproc) - 1 : 1 ))
memory_budget: 8GiB
device_memory_budget: 16GiB
metrics: {listen: 127.0.0.1:$METRICS_PORT}
datasets:
  bench: {path: $BUNDLE/data/bench}
pipelines:
  train:
    - decode_jpeg: {}
    - random_resized_crop: {size: 224}
    - random_flip: {}
    - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], dtype: float32}
    - layout: chw
EOF
  "${RUN[@]}" "$BUNDLE/bin/stokerd" --config "$WORK/stoker.yaml" > "$WORK/stokerd.log" 2>&1 &
  DAEMON_PID=$!
  local i
  for i in $(seq 1 100); do
    [ -S "$SOCKET" ] && break
    kill -0 "$DAEMON_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -S "$SOCKET" ]; then
    echo "stokerd did not start:"; tail -30 "$WORK/stokerd.log"
    return 1
  fi
  grep -m1 '"cuda"' "$WORK/stokerd.log" || true
  echo "-- stokerd from the bundle: listening on $SOCKET"
  export STOKER_GPU_ADDRESS="unix:$SOCKET" STOKER_GPU_DATASET=bench STOKER_GPU_PIPELINE=train
  export STOKER_GPU_METRICS="http://127.0.0.1:$METRICS_PORT/metrics"
  export PYTHONPATH="$REPO/client/python${PYTHONPATH:+:$PYTHONPATH}"
}

stop_daemon() {
  [ -n "$DAEMON_PID" ] || return 0
  kill -TERM "$DAEMON_PID" 2>/dev/null || true
  wait "$DAEMON_PID" 2>/dev/null || true
  DAEMON_PID=
  echo "stokerd's log, last lines:"; tail -15 "$WORK/stokerd.log"
  if [ -n "${OUT:-}" ]; then cp "$WORK/stokerd.log" "$OUT/stokerd.log"; fi
  rm -rf "$WORK"
}

python_gpu_tests() {
  if python3 -c 'import pytest' 2>/dev/null; then
    timeout 240 python3 -m pytest -q -p no:cacheprovider "$REPO/tests/gpu/test_cuda_python.py"
  else
    timeout 240 python3 "$REPO/tests/gpu/test_cuda_python.py"
  fi
}

kill9_check() {
  timeout 120 python3 "$REPO/tests/gpu/kill9_check.py" --address "$STOKER_GPU_ADDRESS" \
    --dataset bench --pipeline train --metrics-url "$STOKER_GPU_METRICS" \
    ${OUT:+--out "$OUT/kill9.json"}
}

gpu_bench() {
  timeout 240 python3 "$REPO/tests/gpu/bench_gpu.py" --address "$STOKER_GPU_ADDRESS" \
    --dataset bench --pipeline train --batch-size 256 ${OUT:+--out "$OUT/gpu-bench.json"}
}

open_bundle() {
  local where=${1:-build-gpu.tar.gz}
  if [[ $where == *.tar.gz ]]; then
    [ -f "$where" ] || die "no bundle at $where: make one with 'tests/gpu/run.sh pack' on the build machine and carry it"
    local into
    into=$(mktemp -d "${TMPDIR:-/tmp}/stoker-gpu.XXXXXX")
    UNPACKED=$into  # `run` removes it at exit; `exec` leaves it in TMPDIR.
    tar xzf "$where" -C "$into" || die "cannot unpack $where"
    where=$(find "$into" -mindepth 1 -maxdepth 1 -type d | head -1)
  fi
  BUNDLE=$(cd "$where" 2>/dev/null && pwd) \
    || die "no bundle at $where: make one with 'tests/gpu/run.sh pack' on the build machine and carry it"
  [ -f "$BUNDLE/NEEDS_GLIBC" ] || die "$BUNDLE is not a bundle of 'tests/gpu/run.sh pack' (no NEEDS_GLIBC)"
}

# exec BUNDLE BINARY ARGS...: one bundled binary, started as `run` starts
# them (any machine; no GPU needed).
exec_one() {
  open_bundle "$1"
  local binary=$2; shift 2
  choose_runner "$BUNDLE" >&2
  exec "${RUN[@]}" "$BUNDLE/bin/$binary" "$@"
}

run() {
  UNPACKED=
  trap '[ -z "$DAEMON_PID" ] || kill -KILL "$DAEMON_PID" 2>/dev/null; [ -z "$UNPACKED" ] || rm -rf "$UNPACKED"' EXIT
  open_bundle "${1:-}"
  if ! command -v nvidia-smi >/dev/null; then
    echo "tests/gpu/run.sh: no GPU here: nvidia-smi is not installed (no NVIDIA driver); nothing was run" >&2
    exit 2
  fi
  if ! nvidia-smi -L 2>&1 | grep -q '^GPU '; then
    echo "tests/gpu/run.sh: no GPU here: nvidia-smi -L says: $(nvidia-smi -L 2>&1 | head -3)" >&2
    exit 2
  fi
  echo "bundle: $(tr '\n' ';' < "$BUNDLE/BUILT")"
  echo "this machine: $(. /etc/os-release && echo "$PRETTY_NAME"), $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1) driver"
  nvidia-smi -L
  choose_runner "$BUNDLE"
  local started=$SECONDS
  check "stokerd --version lists every GPU" version_lists_gpus
  local t
  for t in "${GPU_TESTS[@]}"; do check "$t" gtest "$t"; done
  check "torch sees the same GPUs" torch_sees_the_gpus
  if start_daemon; then
    check "Python client on the GPU (tests/gpu/test_cuda_python.py)" python_gpu_tests
    check "kill -9 frees the trainer's ring (tests/gpu/kill9_check.py)" kill9_check
    check "benchmark (tests/gpu/bench_gpu.py)" gpu_bench
    stop_daemon
  else
    FAILED+=("stokerd from the bundle")
  fi
  echo "took $((SECONDS - started)) s"
  if [ ${#FAILED[@]} -gt 0 ]; then
    echo "tests/gpu/run.sh: FAILED: ${FAILED[*]}"
    return 1
  fi
  echo "tests/gpu/run.sh: every check passed"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  exec) shift; exec_one "$@" ;;
  run)
    shift
    if [ -n "${OUT:-}" ]; then
      mkdir -p "$OUT"
      set -o pipefail
      run "$@" 2>&1 | tee "$OUT/gpu-run.log"
    else
      run "$@"
    fi
    ;;
  *) echo "usage: tests/gpu/run.sh pack [BUILD [BUNDLE]] | run [BUNDLE] | exec BUNDLE BINARY [ARGS]" >&2; exit 64 ;;
esac
