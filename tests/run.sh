#!/bin/bash
# Runs every test of Stoker: installs what is missing (apt-get), builds, runs
# the C++ tests (ctest) and the Python tests (pytest, with the soak, crash
# and corrupt-shard tests, two at a time), the benchmark smoke runs, and the
# libFuzzer targets under ASan + UBSan for a bounded time (tests/fuzz/run.sh,
# a clang build in build-fuzz/). That is what CI runs, in about 25 minutes
# on 2 cores.
#
# usage: tests/run.sh [--no-fuzz] [--sanitizers] [--tsan] [--long]
#   --no-fuzz     skip the fuzz targets (the quick loop)
#   --tsan        then also build everything with ThreadSanitizer (build-tsan/)
#                 and run every C++ unit and integration test under it. CI
#                 runs only the service-core tests under TSan (TSAN_CORE
#                 below), building only their targets.
#   --sanitizers  then also build everything with ASan + UBSan (gcc, Debug,
#                 build-asan/) and rerun the C++ tests and the end-to-end
#                 tests against it: about 25 minutes more on 2 cores, too
#                 long for CI's 30 (docs/testing.md, "What CI runs")
#   --long        soak for 10 minutes, fuzz each target for 5, and run the
#                 sanitizer pass (the defaults, sized for CI, are 120 s of
#                 soak and 20 s per fuzz target; the environment variables
#                 STOKER_SOAK_SECONDS and STOKER_FUZZ_SECONDS set them too)
set -euo pipefail
cd "$(dirname "$0")/.."
SANITIZERS=0
TSAN=0
FUZZ=1
for arg in "$@"; do
  case "$arg" in
    --no-fuzz) FUZZ=0 ;;
    --sanitizers) SANITIZERS=1 ;;
    --tsan) TSAN=1 ;;
    --long)
      SANITIZERS=1
      export STOKER_SOAK_SECONDS=${STOKER_SOAK_SECONDS:-600}
      export STOKER_FUZZ_SECONDS=${STOKER_FUZZ_SECONDS:-300}
      export STOKER_FUZZ_OPT=${STOKER_FUZZ_OPT:-1} ;;
    *) echo "usage: tests/run.sh [--no-fuzz] [--sanitizers] [--tsan] [--long]" >&2
       exit 2 ;;
  esac
done
JOBS=$(nproc)

# Each step says how long the run has taken so far (bash's SECONDS), so a CI
# log shows where its time goes (CI must stay under 30 minutes).
step() { printf '\n== %s (at %d s)\n' "$*" "$SECONDS"; }

# pytest-xdist runs the Python tests $JOBS at a time: many wait on a daemon,
# a timeout or a child process, so two at a time take less wall time on 2
# cores. Without the plugin they run one at a time.
xdist_args() {
  /usr/bin/python3 -c "import xdist" 2>/dev/null && echo "-n $JOBS"
  return 0
}

step "dependencies"
.ci/install-deps

step "build (RelWithDebInfo)"
# -g1 (line tables: a backtrace still names file and line) instead of -g
# compiles a quarter faster (docs/testing.md, "What CI runs").
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKER_WERROR=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" >/dev/null
cmake --build build -j"$JOBS"

step "C++ tests"
ctest --test-dir build --output-on-failure -j"$JOBS" --timeout 600

step "Python tests"
export STOKER_BUILD_DIR="$PWD/build"
set +e
/usr/bin/python3 -m pytest -q -p no:cacheprovider $(xdist_args) tests/python
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
bench/run --smoke --build-dir build --pipelines recipe,dino \
  --consumers cpp-shm,loader-shm --skip-transfer --skip-autotune \
  --skip-decode-only
bench/jobs --smoke --build-dir build
bench/memory --smoke --build-dir build
bench/embedded --smoke --build-dir build

# The service core's tests (tests/service/): the stream protocol, the stream
# and its sources, shared runs, the open planner, the opener, admission, the
# worker pool, batches, the plan prefetcher, and a dataset read while it is
# staged. CI runs them under ThreadSanitizer; --tsan runs
# every C++ test under it.
TSAN_CORE="stream_session_test admission_test worker_pool_test service_batch_test
  autotuner_test service_remote_batch_test open_planner_test stream_test
  shared_run_test opener_test service_registry_counters_test
  stream_service_test plan_prefetch_test dataset_staging_tests"
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp:halt_on_error=1:second_deadlock_stack=1"
tsan_configure() {
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DSTOKER_TSAN=ON >/dev/null
}
if [ $TSAN -eq 1 ]; then
  step "build with ThreadSanitizer"
  tsan_configure
  cmake --build build-tsan -j"$JOBS"
  step "C++ tests under ThreadSanitizer"
  ctest --test-dir build-tsan --output-on-failure -j"$JOBS" --timeout 900
else
  step "service-core tests under ThreadSanitizer"
  tsan_configure
  # shellcheck disable=SC2086  # TSAN_CORE is a list of targets.
  cmake --build build-tsan -j"$JOBS" --target $TSAN_CORE
  ctest --test-dir build-tsan --output-on-failure -j"$JOBS" --timeout 900 \
    -L "^($(echo $TSAN_CORE | tr ' ' '|'))\$"
fi

if [ $FUZZ -eq 1 ]; then
  # Built at -O0 for CI's 20 s runs: two thirds of the build time, for a
  # tenth to two thirds of the inputs a second (docs/testing.md, "What CI
  # runs"); --long builds at -O1.
  step "fuzz targets (clang libFuzzer + ASan + UBSan), ${STOKER_FUZZ_SECONDS:-20} s each"
  STOKER_FUZZ_OPT=${STOKER_FUZZ_OPT:-0} tests/fuzz/run.sh
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
    -p no:cacheprovider $(xdist_args) tests/python --deselect tests/python/test_install.py \
    --deselect tests/python/test_client_typing.py \
    --deselect tests/python/test_client_package.py \
    --deselect tests/python/test_client_ddp_resize.py \
    --deselect tests/python/test_gpu_script.py
fi
echo "all tests passed in $SECONDS s"
