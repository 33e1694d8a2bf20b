#!/usr/bin/env bash
# System packages the test suite needs beyond Python: Chromium (+ driver) for the dashboard browser tests,
# redis-server for the live tests of the Redis channel layer and cache (the suite starts its own),
# busybox-static for the exec sandbox's test image, bubblewrap and libseccomp2 for the jail every tenant
# process runs in, PgBouncer and HAProxy for the multi-node topology tests, wrk for the web-workers bench,
# and a running Docker engine (scripts/docker-engine.sh).
# Installed with apt-get when missing and we are root; otherwise we fail loudly with what to install.
set -euo pipefail

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
[ -x /usr/bin/redis-server ] || missing+=(redis-server)
[ -x /usr/bin/bwrap ] || missing+=(bubblewrap)
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
[ -x /usr/sbin/haproxy ] || missing+=(haproxy)
[ -x /usr/bin/wrk ] || missing+=(wrk)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "ok installed" || missing+=(busybox-static)
# libseccomp: the jail's system call filter (apps/toolkit/syscall_filter.py)
{ ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep 'libseccomp\.so\.2' >/dev/null || missing+=(libseccomp2)

if [ ${#missing[@]} -eq 0 ]; then
  exec bash "$(dirname "$0")/docker-engine.sh"
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "Missing system packages: ${missing[*]}. Install them (Debian: apt-get install ${missing[*]}) and rerun." >&2
  exit 1
fi

echo "Installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
exec bash "$(dirname "$0")/docker-engine.sh"
