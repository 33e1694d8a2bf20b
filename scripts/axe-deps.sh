#!/usr/bin/env bash
# axe-core, the accessibility engine the every-page browser test injects into each dashboard page
# (tests/browser/test_every_page_browser.py), pinned here and installed with npm into .tools/axe/ (git ignores
# it). Idempotent: nothing is done when the pinned version is already there.
set -euo pipefail

version="4.14.1"
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.tools/axe"
script="$dest/node_modules/axe-core/axe.min.js"

if [ -f "$script" ] && [ "$(cat "$dest/.installed-version" 2>/dev/null)" = "$version" ]; then
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "npm is missing: install Node.js and npm (Debian: apt-get install nodejs npm) and rerun." >&2
  exit 1
fi

echo "Installing axe-core $version into $dest"
rm -rf "$dest"
mkdir -p "$dest"
printf '{"name": "toolgate-axe", "private": true}\n' >"$dest/package.json"
(cd "$dest" && npm install --no-audit --no-fund --loglevel=error --save-exact "axe-core@$version")
test -f "$script" || { echo "axe-core is not at $script" >&2; exit 1; }
echo "$version" >"$dest/.installed-version"
