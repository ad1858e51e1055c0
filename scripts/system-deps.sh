#!/usr/bin/env bash
# Installs the Debian packages RMS's local stack and test suite need when they are missing.
#   scripts/system-deps.sh dev   what `rms dev` needs: Java and Maven for the embedded Apache Kafka
#   scripts/system-deps.sh       everything `make test` needs: the above, a JDK (the check-back
#                                conformance servers), the PostgreSQL JDBC driver for Spark,
#                                Chromium for the dashboard test and shellcheck for the deploy
#                                scripts; Patroni and etcd for the fault suite's PostgreSQL
#                                that fails over (also for `make soak`)
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
if [ "${1:-test}" != dev ]; then
  command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)  # conformance servers
  [ -f /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
fi
# the fault suite's failover cluster (tests/faults/ha.py): Patroni and its store, etcd
if [ "${1:-test}" != dev ] || [ -n "${RMS_FAILOVER_DEPS:-}" ]; then
  command -v patroni >/dev/null 2>&1 || need+=(patroni)
  command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
fi
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
echo "system-deps: installing ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
