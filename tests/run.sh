#!/bin/bash
# Runs every test of Stoker: installs what is missing (apt-get), builds, runs
# the C++ tests (ctest) and the Python tests (pytest, with the soak, crash
# and corrupt-shard tests), runs the libFuzzer targets for a bounded time
# (tests/fuzz/run.sh, a clang build in build-fuzz/), then builds again with
# AddressSanitizer + UndefinedBehaviorSanitizer and reruns the C++ tests and
# the end-to-end tests.
#
# usage: tests/run.sh [--no-sanitizers] [--no-fuzz] [--long]
#   --long  soak for 10 minutes and fuzz each target for 5 (the defaults,
#           sized for CI, are 120 s of soak and 20 s per fuzz target; the
#           environment variables STOKER_SOAK_SECONDS and
#           STOKER_FUZZ_SECONDS set them too)
set -euo pipefail
cd "$(dirname "$0")/.."
SANITIZERS=1
FUZZ=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitizers) SANITIZERS=0 ;;
    --no-fuzz) FUZZ=0 ;;
    --long)
      export STOKER_SOAK_SECONDS=${STOKER_SOAK_SECONDS:-600}
      export STOKER_FUZZ_SECONDS=${STOKER_FUZZ_SECONDS:-300} ;;
    *) echo "usage: tests/run.sh [--no-sanitizers] [--no-fuzz] [--long]" >&2
       exit 2 ;;
  esac
done
JOBS=$(nproc)

# Each step says how long the run has taken so far (bash's SECONDS), so a CI
# log shows where its time goes (CI must stay under 30 minutes).
step() { printf '\n== %s (at %d s)\n' "$*" "$SECONDS"; }

step "dependencies"
.ci/install-deps

step "build (RelWithDebInfo)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$JOBS"

step "C++ tests"
ctest --test-dir build --output-on-failure -j"$JOBS" --timeout 600

step "Python tests"
export STOKER_BUILD_DIR="$PWD/build"
set +e
/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python
rc=$?
set -e
# pytest exits 5 when it collects no test: that is a failure of this script's
# setup, not a pass.
if [ $rc -ne 0 ]; then
  [ $rc -eq 5 ] && echo "pytest collected no tests" >&2
  exit $rc
fi

step "benchmark smoke run (the bench cannot rot)"
bench/run --smoke --build-dir build
bench/jobs --smoke --build-dir build

if [ $FUZZ -eq 1 ]; then
  step "fuzz targets (clang libFuzzer + ASan + UBSan), ${STOKER_FUZZ_SECONDS:-20} s each"
  tests/fuzz/run.sh
fi

if [ $SANITIZERS -eq 1 ]; then
  step "build with ASan + UBSan"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DSTOKER_SANITIZE=ON >/dev/null
  cmake --build build-asan -j"$JOBS"
  # With CUDA built in and an NVIDIA driver present, the driver reserves
  # address space where ASan protects its shadow gap (cudaGetDeviceCount then
  # fails with "out of memory") and keeps allocations of cuInit to the end:
  # google/sanitizers#629. Without a driver both are moot.
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:protect_shadow_gap=0
  export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  step "C++ tests under ASan + UBSan"
  ctest --test-dir build-asan --output-on-failure -j"$JOBS" --timeout 900
  step "end-to-end tests against the ASan + UBSan binaries"
  # Left out here: what runs no daemon code the first pass did not (the
  # install, mypy, the package checks, torchrun's launcher around what
  # test_client_resize.py already runs under the sanitizers, the GPU
  # bundle's packing).
  STOKER_BUILD_DIR="$PWD/build-asan" STOKER_SANITIZED=1 /usr/bin/python3 -m pytest -q \
    -p no:cacheprovider tests/python --deselect tests/python/test_install.py \
    --deselect tests/python/test_client_typing.py \
    --deselect tests/python/test_client_package.py \
    --deselect tests/python/test_client_ddp_resize.py \
    --deselect tests/python/test_gpu_script.py
fi
echo "all tests passed in $SECONDS s"
