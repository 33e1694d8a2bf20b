# Toolgate: one image for every role (web, worker, migrate). Built by `make deploy-check`, which first
# makes the base image and the wheelhouse (no image registry is needed):
#
#   bash scripts/deploy-check.sh build     # toolgate-base:bookworm, the wheelhouse, then this image
#
# * Base: toolgate-base:bookworm, Debian bookworm made with debootstrap and `docker import`.
# * Python packages come from deploy/.cache/wheels (`pip wheel -c constraints.txt .` on the host, CPU
#   torch included) in a first stage, so the wheels themselves are not a layer of the final image.
# * Runs as the unprivileged user toolgate (uid 10001). The jail every tenant command runs in is
#   bubblewrap with unprivileged user namespaces: the container needs them allowed, see deploy/README.md
#   ("The jail inside a container") for the options and their trade-offs.
# * Static files are collected at build time into $TOOLGATE_DATA_DIR/staticfiles (served by WhiteNoise).
# * Roles: `web` (daphne on :8000), `worker` (a django-q2 cluster), `migrate` (migrations and the cache
#   table, once per release before the new processes start), `manage ARGS` (any management command).

FROM toolgate-base:bookworm AS wheels
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends python3 python3-venv; \
    rm -rf /var/lib/apt/lists/*; \
    python3 -m venv /opt/venv
COPY deploy/.cache/wheels/ /tmp/wheels/
# Debian bookworm's Python is 3.11.2; the wheelhouse is resolved for the project's (3.11 or newer), and
# one pinned wheel (soupsieve, for beautifulsoup4's CSS selectors) declares 3.11.5 or newer without
# needing it: its Requires-Python is ignored, and the selectors are exercised right after.
RUN /opt/venv/bin/pip install --no-cache-dir --no-compile --no-index --ignore-requires-python \
        --find-links /tmp/wheels /tmp/wheels/*.whl \
    && /opt/venv/bin/python -c "import bs4; assert bs4.BeautifulSoup('<p class=a>x</p>', 'html.parser').select('p.a')" \
    && { /opt/venv/bin/python -m compileall -q /opt/venv/lib > /dev/null || true; }  # bytecode: best effort

FROM toolgate-base:bookworm
LABEL org.opencontainers.image.title="toolgate" \
      org.opencontainers.image.description="Toolgate: govern and run the tools AI agents use"

# python3 (the venv's interpreter), bubblewrap, libseccomp2 and util-linux (prlimit) for the jail, tini as PID 1
# (forwards signals, reaps what jails leave behind), ca-certificates for outbound HTTPS.
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends python3 bubblewrap libseccomp2 util-linux ca-certificates tini procps; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log; \
    groupadd --gid 10001 toolgate; \
    useradd --uid 10001 --gid toolgate --home-dir /var/lib/toolgate --no-create-home --shell /usr/sbin/nologin toolgate; \
    install -d -o toolgate -g toolgate -m 0750 /var/lib/toolgate /var/lib/toolgate/workspaces

COPY --from=wheels /opt/venv /opt/venv
COPY deploy/docker/entrypoint.sh /usr/local/bin/toolgate-entrypoint
COPY manage.py pyproject.toml /app/
COPY config /app/config
COPY apps /app/apps
COPY templates /app/templates
COPY static /app/static

ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LANG=C.UTF-8 \
    DJANGO_SETTINGS_MODULE=config.settings \
    HOME=/var/lib/toolgate \
    TOOLGATE_DATA_DIR=/var/lib/toolgate \
    TOOLGATE_WORKSPACE_ROOT=/var/lib/toolgate/workspaces

WORKDIR /app
USER toolgate:toolgate

# Settings are read at import: a syntactically valid database URL and throwaway keys, so nothing is
# started, connected to or written besides the static files.
RUN DATABASE_URL=postgres://collectstatic@127.0.0.1:1/collectstatic \
    SECRET_KEY=collectstatic-only LOG_FORMAT=text \
    FIELD_ENCRYPTION_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= \
    python manage.py collectstatic --noinput --verbosity 0 \
    && test -n "$(ls /var/lib/toolgate/staticfiles)"

EXPOSE 8000
ENTRYPOINT ["tini", "--", "toolgate-entrypoint"]
CMD ["web"]
