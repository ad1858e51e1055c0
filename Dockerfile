# syntax=docker/dockerfile:1
#
# One image for every RMS process. The entrypoint is `rms`, so the container's arguments
# choose the process: serve | confirm-worker | recovery-worker | migrate | dead | ...
#
#   docker build -t rms:0.2.0 .                          # API, workers, migrations (no Java)
#   docker build --target report -t rms-report:0.2.0 .   # + JRE 17, PySpark, psql:
#                                                        #   report, export, retention
#
#   docker run --rm --env-file rms.env rms:0.2.0 migrate
#   docker run -d --env-file rms.env -p 8000:8000 rms:0.2.0            # rms serve
#   docker run -d --env-file rms.env rms:0.2.0 confirm-worker --metrics-port 8000 --metrics-host 0.0.0.0
#
# The base is pinned to a full version; pin its digest too in your own registry mirror
# (python:3.11.14-slim-bookworm@sha256:...) when you need bit-for-bit rebuilds.
# Bookworm (not trixie) because it still ships openjdk-17-jre-headless for Spark.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
# the release (the repository's VERSION; release/version.py keeps this copy equal to it)
ARG RELEASE_VERSION=0.2.0

# ---------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS base

ARG RELEASE_VERSION
LABEL org.opencontainers.image.title="rms-server" \
      org.opencontainers.image.description="RMS, the reliable message service: API, workers, migrations" \
      org.opencontainers.image.version="${RELEASE_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/rms-dev/rms" \
      org.opencontainers.image.vendor="The RMS authors"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/rms/.venv \
    PATH=/opt/rms/.venv/bin:/opt/rms/bin:${PATH}

# tini is PID 1: it forwards SIGTERM to rms and reaps children, so a rolling update drains
# in-flight work instead of waiting for SIGKILL. /var/lib/rms holds report output and
# archives (volumes mounted there inherit the rms owner).
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends tini; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --system --gid 10001 rms; \
    useradd --system --uid 10001 --gid rms --home-dir /opt/rms --no-create-home \
        --shell /usr/sbin/nologin rms; \
    install -d -o rms -g rms -m 0750 /var/lib/rms /var/lib/rms/reports /var/lib/rms/archive

# ---------------------------------------------------------------------------------------
FROM base AS build

RUN python -m venv "${VIRTUAL_ENV}"
WORKDIR /src

# Dependencies first (from pyproject.toml only), so a code change reuses this layer. The
# rms-client distribution comes from this repository (below), never from an index; its own
# dependencies are among the server's.
COPY pyproject.toml README.md LICENSE NOTICE ./
# the versions the release is tested with (release/constraints.txt, shipped in dist/)
COPY release/constraints.txt /tmp/constraints.txt
RUN python -c "import pathlib, tomllib; \
project = tomllib.loads(pathlib.Path('pyproject.toml').read_text())['project']; \
dependencies = [d for d in project['dependencies'] if not d.startswith('rms-client')]; \
pathlib.Path('/tmp/requirements.txt').write_text('\n'.join(dependencies) + '\n'); \
pathlib.Path('/tmp/requirements-spark.txt').write_text( \
    '\n'.join(project['optional-dependencies']['spark']) + '\n')"
RUN pip install -r /tmp/requirements.txt -c /tmp/constraints.txt

COPY rms ./rms
COPY message_service ./message_service
COPY confirm_service ./confirm_service
COPY recovery_service ./recovery_service
COPY spark ./spark
COPY history ./history
COPY bench ./bench
COPY clients/python ./clients/python
RUN pip install --no-deps ./clients/python . && rms --help >/dev/null

# ---------------------------------------------------------------------------------------
FROM build AS build-report

# rms itself is already in the venv; add the `spark` extra's dependencies.
RUN pip install -r /tmp/requirements-spark.txt -c /tmp/constraints.txt

# ---------------------------------------------------------------------------------------
# The batch image: `rms report`, `rms export` and `rms retention run`. Spark runs its
# driver here (local[*] or client mode against a cluster; see docs/operations/spark.md) and reads
# PostgreSQL through Debian's JDBC driver (/usr/share/java/postgresql.jar).
FROM base AS report

LABEL org.opencontainers.image.title="rms-report" \
      org.opencontainers.image.description="RMS's batch jobs: rms report (Spark), rms export, rms retention run"

# openjdk's postinst needs the man directory that slim images delete.
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless libpostgresql-jdbc-java postgresql-client-15; \
    rm -rf /var/lib/apt/lists/*

COPY --from=build-report /opt/rms/.venv /opt/rms/.venv
COPY --chmod=0755 deploy/scripts/ /opt/rms/bin/
COPY LICENSE NOTICE /usr/share/doc/rms/

USER 10001:10001
WORKDIR /tmp
ENV HOME=/tmp
ENTRYPOINT ["tini", "--", "rms"]
CMD ["report", "--help"]

# ---------------------------------------------------------------------------------------
# The default target (last stage): API, workers and migrations. No Java, no compiler.
FROM base AS runtime

COPY --from=build /opt/rms/.venv /opt/rms/.venv
COPY --chmod=0755 deploy/scripts/ /opt/rms/bin/
COPY LICENSE NOTICE /usr/share/doc/rms/

USER 10001:10001
WORKDIR /tmp
ENV HOME=/tmp
EXPOSE 8000

# /healthz answers while the process runs (it does not touch the database or Kafka), so a
# database outage never restarts healthy containers. slim has no curl: use Python.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]

ENTRYPOINT ["tini", "--", "rms"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
