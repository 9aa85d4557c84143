#!/bin/bash
# Installs stokerd as a systemd service:
#   - the system user and group `stoker` (no login, no home),
#   - stokerd and stoker into PREFIX/bin (default /usr/local),
#   - the unit into /etc/systemd/system/stokerd.service, with ExecStart
#     pointing at the installed stokerd,
#   - the pipeline presets into PREFIX/share/stoker/presets (where the
#     installed stokerd looks for them),
#   - /etc/stoker/stokerd.yaml from config/stokerd.yaml, unless one is
#     there already (it is never overwritten),
# then reloads systemd and enables the service (start it once the config
# names your datasets: `systemctl start stokerd`).
#
# usage: deploy/systemd/install.sh [--build-dir DIR] [--prefix DIR]
#                                  [--root DIR] [--no-systemctl]
#   --build-dir  where stokerd and stoker were built (default: build)
#   --prefix     install prefix of the binaries (default: /usr/local)
#   --root       install under DIR instead of / (staging, packaging, tests):
#                no user is created and systemctl is not run
#   --no-systemctl  do not run systemctl (e.g. in a container build)
set -euo pipefail
SELF="$(realpath "$0")"
REPO="$(dirname "$SELF")/../.."

BUILD="$REPO/build"
PREFIX=/usr/local
ROOT=""
SYSTEMCTL=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD="$(realpath -m "$2")"; shift 2 ;;
    --prefix) PREFIX="$2"; shift 2 ;;
    --root) ROOT="$(realpath -m "$2")"; SYSTEMCTL=0; shift 2 ;;
    --no-systemctl) SYSTEMCTL=0; shift ;;
    -h|--help) sed -n '2,18p' "$SELF" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
cd "$REPO"

for exe in "$BUILD/server/stokerd" "$BUILD/client/cli/stoker"; do
  if [ ! -x "$exe" ]; then
    echo "install.sh: $exe is missing; build first (README: Building)" >&2
    exit 1
  fi
done
if [ -z "$ROOT" ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: needs root (or --root DIR to stage the files)" >&2
  exit 1
fi

if [ -z "$ROOT" ] && ! getent passwd stoker >/dev/null; then
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin --comment "Stoker data-serving daemon" stoker
  echo "created the system user stoker"
fi

BIN="$PREFIX/bin"
install -d "$ROOT$BIN" "$ROOT/etc/systemd/system" "$ROOT/etc/stoker"
install -m 0755 "$BUILD/server/stokerd" "$BUILD/client/cli/stoker" "$ROOT$BIN/"
install -d "$ROOT$PREFIX/share/stoker/presets"
install -m 0644 config/presets/*.yaml "$ROOT$PREFIX/share/stoker/presets/"
sed "s|^ExecStart=/usr/local/bin/stokerd |ExecStart=$BIN/stokerd |" \
  deploy/systemd/stokerd.service > "$ROOT/etc/systemd/system/stokerd.service"
chmod 0644 "$ROOT/etc/systemd/system/stokerd.service"
if [ -e "$ROOT/etc/stoker/stokerd.yaml" ]; then
  echo "kept the existing /etc/stoker/stokerd.yaml"
else
  install -m 0644 config/stokerd.yaml "$ROOT/etc/stoker/stokerd.yaml"
  echo "installed /etc/stoker/stokerd.yaml: edit its datasets and pipelines"
fi

if [ "$SYSTEMCTL" -eq 1 ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  systemctl enable stokerd.service
  echo "enabled stokerd.service; start it with: systemctl start stokerd"
else
  echo "installed under ${ROOT:-/}; systemctl not run"
fi
