#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance) and the Node >= 22 it needs, pinned in
# tests/conformance/package.json + package-lock.json, installed with `npm ci` into .tools/conformance/ (git
# ignores it). The npm package `node` puts a Node 22 binary at node_modules/node/bin/node, so the machine's own
# Node only has to run npm. Idempotent: nothing is done when the installed lock file matches the pinned one.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
pinned="$root/tests/conformance"
dest="$root/.tools/conformance"
node="$dest/node_modules/node/bin/node"
cli="$dest/node_modules/@modelcontextprotocol/conformance/dist/index.js"

if [ -x "$node" ] && [ -f "$cli" ] && cmp -s "$pinned/package-lock.json" "$dest/.installed-lock.json"; then
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "npm is missing: install Node.js and npm (Debian: apt-get install nodejs npm) and rerun." >&2
  exit 1
fi

echo "Installing the MCP conformance suite into $dest"
rm -rf "$dest"
mkdir -p "$dest"
cp "$pinned/package.json" "$pinned/package-lock.json" "$dest/"
# --engine-strict=false: the suite declares node >= 22, which the Node 22 installed here provides.
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error --engine-strict=false)
"$node" --version >/dev/null
test -f "$cli" || { echo "The conformance CLI is not at $cli" >&2; exit 1; }
cp "$pinned/package-lock.json" "$dest/.installed-lock.json"
