#!/bin/sh
# Renders pgbouncer.ini and the auth file from the environment and a password file:
#   DB_HOST (postgres), DB_PORT (5432), DB_NAME (toolgate), DB_USER (toolgate), DB_PASSWORD_FILE,
#   PGBOUNCER_POOL_SIZE (server connections per database and user, 20), PGBOUNCER_MAX_CLIENT_CONN (500)
set -eu
: "${DB_HOST:=postgres}" "${DB_PORT:=5432}" "${DB_NAME:=toolgate}" "${DB_USER:=toolgate}"
password=$(cat "$DB_PASSWORD_FILE")
umask 077
printf '"%s" "%s"\n' "$DB_USER" "$(printf '%s' "$password" | sed 's/"/""/g')" > /run/pgbouncer/userlist.txt
sed -e "s/@DB_HOST@/$DB_HOST/; s/@DB_PORT@/$DB_PORT/; s/@DB_NAME@/$DB_NAME/g; s/@DB_USER@/$DB_USER/g" \
    -e "s/@POOL_SIZE@/${PGBOUNCER_POOL_SIZE:-20}/; s/@MAX_CLIENT_CONN@/${PGBOUNCER_MAX_CLIENT_CONN:-500}/" \
    /etc/pgbouncer/pgbouncer.ini.in > /run/pgbouncer/pgbouncer.ini
exec pgbouncer /run/pgbouncer/pgbouncer.ini
