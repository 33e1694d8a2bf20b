#!/bin/sh
# redis-server with the password from REDIS_PASSWORD_FILE (kept out of the command line and `ps`).
set -eu
umask 077
{
  echo "bind 0.0.0.0 ::"
  echo "port 6379"
  echo "protected-mode no"
  echo "save \"\""
  echo "appendonly no"
  echo "maxmemory ${REDIS_MAXMEMORY:-256mb}"
  echo "maxmemory-policy allkeys-lru"
  if [ -n "${REDIS_PASSWORD_FILE:-}" ]; then echo "requirepass \"$(cat "$REDIS_PASSWORD_FILE")\""; fi
} > /run/redis-conf/redis.conf
exec redis-server /run/redis-conf/redis.conf
