#!/bin/sh
# First start: initdb, the application role and database (owner), and the vector extension (pgvector
# is not a trusted extension, so the superuser creates it). Passwords come from files.
#   POSTGRES_PASSWORD_FILE  the superuser's password
#   TOOLGATE_DB_USER, TOOLGATE_DB_NAME, TOOLGATE_DB_PASSWORD_FILE  the application's role and database
set -eu
: "${TOOLGATE_DB_USER:=toolgate}" "${TOOLGATE_DB_NAME:=toolgate}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  initdb --pgdata="$PGDATA" --username=postgres --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --no-locale --pwfile="$POSTGRES_PASSWORD_FILE" >/dev/null
  app_password=$(cat "$TOOLGATE_DB_PASSWORD_FILE")
  pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses='' -c unix_socket_directories=/run/postgresql" \
    --wait start >/dev/null
  psql -v ON_ERROR_STOP=1 -h /run/postgresql -U postgres -d postgres -q \
    -v user="$TOOLGATE_DB_USER" -v db="$TOOLGATE_DB_NAME" -v password="$app_password" <<'SQL'
CREATE ROLE :"user" LOGIN PASSWORD :'password';
CREATE DATABASE :"db" OWNER :"user";
\connect :"db"
CREATE EXTENSION vector;
SQL
  pg_ctl --pgdata="$PGDATA" --mode=fast --wait stop >/dev/null
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
  echo "postgres: initialised $PGDATA (database $TOOLGATE_DB_NAME, owner $TOOLGATE_DB_USER, with vector)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/run/postgresql \
  -c max_connections="${POSTGRES_MAX_CONNECTIONS:-200}" -c shared_buffers="${POSTGRES_SHARED_BUFFERS:-256MB}" \
  -c timezone=UTC -c password_encryption=scram-sha-256 "$@"
