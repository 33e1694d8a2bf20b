#!/bin/sh
# The Toolgate image's entrypoint: one role per container. Secrets come from the environment or from
# files (SECRET_KEY_FILE, FIELD_ENCRYPTION_KEY_FILE, DATABASE_URL_FILE, REDIS_URL_FILE: the settings
# read NAME_FILE themselves, so `docker exec … python manage.py` sees them too).
set -eu
role=${1:-web}
if [ $# -gt 0 ]; then shift; fi
case "$role" in
  web)
    # One daphne per container; run more containers behind the load balancer to scale out.
    exec daphne --bind 0.0.0.0 --port "${TOOLGATE_PORT:-8000}" --proxy-headers "$@" config.asgi:application
    ;;
  worker)
    exec python manage.py qcluster "$@"
    ;;
  migrate)
    # Once per release, before the new web and worker processes start (see deploy/README.md).
    python manage.py migrate --noinput "$@"
    exec python manage.py createcachetable
    ;;
  manage)
    exec python manage.py "$@"
    ;;
  *)
    exec "$role" "$@"
    ;;
esac
