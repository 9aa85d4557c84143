#!/bin/bash
# The Stoker demo: builds stokerd and the stoker CLI, makes a small
# ImageNet-like folder of JPEGs, packs it into a sharded LMDB dataset, starts
# stokerd, streams a few epochs of augmented batches over shared memory (the
# transport a trainer on the same node uses), then reads the same images with
# PyTorch's DataLoader and the same torchvision transforms, and prints both
# rates side by side. It stops the daemon at the end.
#
# usage: bench/demo.sh [--images N] [--epochs E]
#   --images N  JPEGs to make (default 2000, 300-640 px, 10 classes)
#   --epochs E  epochs to stream (default 3): enough for a steady rate
# Work files go to $STOKER_DEMO_DIR (default /tmp/stoker-demo); the images are
# made once and kept there.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=2000
EPOCHS=3
while [ $# -gt 0 ]; do
  case "$1" in
    --images) IMAGES=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "bench/demo.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
WORK="${STOKER_DEMO_DIR:-/tmp/stoker-demo}"
CORES=$(nproc)
step() { printf '\n== %s\n' "$*"; }

cat <<EOF
The Stoker demo, in $WORK:
  1. installs the Debian packages in .ci/install-deps that are missing (apt-get)
  2. builds stokerd and the stoker CLI into build/: up to about 10 minutes on
     2 cores the first time, seconds once built (the compiler's progress shows)
  3. makes $IMAGES JPEGs (once) and packs them into a dataset
  4. starts stokerd and streams $EPOCHS epochs over shared memory
     (random_resized_crop 224, flip, normalize to float32, batch 64)
  5. reads the same images with PyTorch's DataLoader ($CORES workers, the same
     torchvision transforms) for 2 epochs
After the build, steps 3-5 take 1-2 minutes.
EOF

step "1/5 dependencies"
.ci/install-deps

step "2/5 building stokerd and stoker"
# The configuration tests/run.sh uses, so that both share one build.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKER_WERROR=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" >/dev/null
cmake --build build -j"$CORES" --target stokerd stoker
STOKER=build/client/cli/stoker
STOKERD=build/server/stokerd

step "3/5 making $IMAGES images and packing them"
mkdir -p "$WORK"
if [ ! -f "$WORK/images/.done-$IMAGES" ]; then
  rm -rf "$WORK/images"
  /usr/bin/python3 bench/make_images.py "$WORK/images" --count "$IMAGES" --classes 10
  touch "$WORK/images/.done-$IMAGES"
fi
$STOKER pack "$WORK/images" "$WORK/train" --shards 4 --force

cat > "$WORK/stoker.yaml" <<YAML
listen: {unix: $WORK/stoker.sock}
workers: auto
prefetch: auto
memory_budget: 1GiB
datasets:
  train: {path: $WORK/train}
pipelines:
  train:
    - decode_image: {}
    - random_resized_crop: {size: 224}
    - random_flip: {}
    - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], dtype: float32}
    - layout: chw
YAML

step "4/5 starting stokerd and streaming $EPOCHS epochs over shm"
rm -f "$WORK/stoker.sock"
$STOKERD --config "$WORK/stoker.yaml" 2>"$WORK/stokerd.log" &
DAEMON=$!
trap 'kill $DAEMON 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$WORK/stoker.sock" ] && break; sleep 0.1; done
[ -S "$WORK/stoker.sock" ] || { echo "stokerd did not start; its log:" >&2; cat "$WORK/stokerd.log" >&2; exit 1; }
$STOKER stream --address "unix:$WORK/stoker.sock" --dataset train \
  --pipeline train --batch-size 64 --epochs "$EPOCHS" --seed 1 \
  --transport shm --json > "$WORK/stream.json"
STOKER_RATE=$(/usr/bin/python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert r["status"] == "OK" and r["transport"] == "shm", r
print(round(r["steady_samples_per_second"]))' "$WORK/stream.json")
echo "stoker, shm: $STOKER_RATE samples/s after the first batch"
kill -TERM $DAEMON
wait $DAEMON
trap - EXIT

step "5/5 PyTorch's DataLoader on the same images ($CORES workers)"
if /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
  /usr/bin/python3 bench/baselines.py dataloader "$WORK/images" --pipelines train \
    --epochs 2 --batch-size 64 --workers "$CORES" --seed 1 > "$WORK/dataloader.json"
  LOADER_RATE=$(/usr/bin/python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])["pipelines"]["train"]
print(round(r["steady_samples_per_second"]))' "$WORK/dataloader.json")
  echo "DataLoader: $LOADER_RATE samples/s after the first batch"
else
  LOADER_RATE=""
  echo "no torch and torchvision for /usr/bin/python3 (Debian: python3-torch python3-torchvision): skipped"
fi

step "result (batch 64, $IMAGES JPEGs of 300-640 px, $CORES cores)"
printf '%-44s %8s samples/s\n' "stokerd, read over shm by \`stoker stream\`" "$STOKER_RATE"
if [ -n "$LOADER_RATE" ]; then
  printf '%-44s %8s samples/s\n' "PyTorch DataLoader, $CORES workers" "$LOADER_RATE"
  /usr/bin/python3 -c 'import sys; print(f"stoker / DataLoader: {int(sys.argv[1]) / int(sys.argv[2]):.2f}x")' \
    "$STOKER_RATE" "$LOADER_RATE"
fi
cat <<EOF
Both ran the same augmentations on the same cores, one after the other; a
machine busy with other work moves both. bench/run measures more systems,
several rounds each (docs/benchmarks.md). stokerd's log: $WORK/stokerd.log
EOF
