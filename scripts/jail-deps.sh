#!/usr/bin/env bash
# bubblewrap, the jail every process started for a tenant runs in (apps/toolkit/jail.py), and libseccomp
# for its system call filter (apps/toolkit/syscall_filter.py). Installed with
# apt-get when missing and we are root; otherwise a warning: Toolgate still serves, and refuses tenants'
# commands with the reason (also on /readyz and the dashboard's Sandbox page) until it is installed.
set -euo pipefail
have_seccomp() { { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep 'libseccomp\.so\.2' >/dev/null; }
command -v bwrap >/dev/null 2>&1 && have_seccomp && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing bubblewrap and libseccomp2 (the jail for tenants' commands)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends bubblewrap libseccomp2 >/dev/null
  exit 0
fi
echo "warning: bubblewrap or libseccomp is not installed, so tenants' commands will be refused; install them (Debian: apt-get install bubblewrap libseccomp2)" >&2
