#!/usr/bin/env bash
# Make sure a Docker engine answers on the local socket (the exec sandbox's tests need a real one):
# install Debian's docker.io when dockerd is missing and we are root, then start dockerd in the
# background when nothing answers, and wait for it. Fails loudly when that cannot be done.
set -euo pipefail

SOCKET=/var/run/docker.sock
LOG=${DOCKERD_LOG:-/var/log/toolgate-dockerd.log}

answers() {
  python3 - "$SOCKET" <<'PY' >/dev/null 2>&1
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(3)
s.connect(sys.argv[1])
s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
sys.exit(0 if b"OK" in s.recv(4096) else 1)
PY
}

if [ -S "$SOCKET" ] && answers; then
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "No Docker engine: install Debian's docker.io (apt-get install docker.io) and start dockerd." >&2
    exit 1
  fi
  echo "Installing the Docker engine (docker.io)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends docker.io >/dev/null
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "The Docker engine is installed but not running; start dockerd (as root) and rerun." >&2
  exit 1
fi

echo "Starting dockerd (log: $LOG)"
nohup dockerd >"$LOG" 2>&1 &
for _ in $(seq 1 60); do
  if [ -S "$SOCKET" ] && answers; then
    exit 0
  fi
  sleep 0.5
done
echo "dockerd did not answer within 30 s; its log:" >&2
tail -20 "$LOG" >&2
exit 1
