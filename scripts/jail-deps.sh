#!/usr/bin/env bash
# bubblewrap, the jail every process started for a tenant runs in (apps/toolkit/jail.py). Installed with
# apt-get when missing and we are root; otherwise a warning: Toolgate still serves, and refuses tenants'
# commands with the reason (also on /readyz and the dashboard's Sandbox page) until it is installed.
set -euo pipefail
command -v bwrap >/dev/null 2>&1 && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing bubblewrap (the jail for tenants' commands)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
  exit 0
fi
echo "warning: bubblewrap is not installed, so tenants' commands will be refused; install it (Debian: apt-get install bubblewrap)" >&2
