#!/bin/bash
# The Stoker demo: builds, makes a small ImageNet-like image folder, packs it
# into a sharded LMDB dataset, starts stokerd, streams one epoch of augmented
# batches with `stoker stream`, prints the throughput, and stops the daemon.
#
# usage: bench/demo.sh [--images N]      (work files go to $STOKER_DEMO_DIR,
#                                         default /tmp/stoker-demo)
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=500
[ "${1:-}" = "--images" ] && IMAGES="$2"
WORK="${STOKER_DEMO_DIR:-/tmp/stoker-demo}"

.ci/install-deps
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target stokerd stoker
STOKER=build/client/cli/stoker
STOKERD=build/server/stokerd

mkdir -p "$WORK"
if [ ! -f "$WORK/images/.done-$IMAGES" ]; then
  echo "== making $IMAGES images in $WORK/images"
  rm -rf "$WORK/images"
  /usr/bin/python3 bench/make_images.py "$WORK/images" --count "$IMAGES" --classes 10
  touch "$WORK/images/.done-$IMAGES"
fi

echo "== packing"
$STOKER pack "$WORK/images" "$WORK/train" --shards 4 --force

cat > "$WORK/stoker.yaml" <<YAML
listen: {unix: $WORK/stoker.sock}
workers: auto
memory_budget: 1GiB
datasets:
  train: {path: $WORK/train}
pipelines:
  train:
    - decode_jpeg: {}
    - random_resized_crop: {size: 224}
    - random_flip: {}
    - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], dtype: float32}
    - layout: chw
YAML

echo "== starting stokerd"
$STOKERD --config "$WORK/stoker.yaml" 2>"$WORK/stokerd.log" &
DAEMON=$!
trap 'kill $DAEMON 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$WORK/stoker.sock" ] && break; sleep 0.1; done

echo "== streaming one epoch (batch 64, random_resized_crop 224 + flip + normalize)"
$STOKER stream --address "unix:$WORK/stoker.sock" --dataset train \
  --pipeline train --batch-size 64 --epochs 1 --seed 1

echo "== stopping stokerd"
kill -TERM $DAEMON
wait $DAEMON
trap - EXIT
echo "stokerd exited cleanly; its log is in $WORK/stokerd.log"
