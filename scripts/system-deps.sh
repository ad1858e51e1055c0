#!/usr/bin/env bash
# Installs the Debian packages RMS's local stack and test suite need when they are missing.
#   scripts/system-deps.sh dev   what `rms dev` needs: Java and Maven for the embedded Apache Kafka
#   scripts/system-deps.sh release   what `make dist` and `make release-check` need: Java, a JDK
#                                and Maven (the jar, the embedded Apache Kafka), buildah and
#                                mmdebstrap (the server and report images)
#   scripts/system-deps.sh       everything `make test` needs: the above (the JDK also builds
#                                the check-back conformance servers), the PostgreSQL JDBC driver for Spark,
#                                Debian's PostgreSQL (built with OpenSSL: the TLS tests),
#                                Chromium for the dashboard test, shellcheck for the deploy
#                                scripts, promtool (Debian's prometheus) for the alert rules
#                                (on a host that runs systemd that package also starts a
#                                Prometheus server on :9090: `systemctl disable --now
#                                prometheus`); Patroni and etcd for the fault suite's
#                                PostgreSQL that fails over (also for `make soak`)
set -euo pipefail
mode=${1:-test}
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
if [ "$mode" != dev ]; then
  # the conformance servers, and the Java client's jar
  command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
  # make dist: the images, built on a bootstrapped Debian base (release/image.py)
  command -v buildah >/dev/null 2>&1 || need+=(buildah)
  command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
fi
if [ "$mode" = test ]; then
  [ -f /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
  # a PostgreSQL built with OpenSSL, for the tests of PostgreSQL over TLS
  compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need+=(postgresql)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
  command -v promtool >/dev/null 2>&1 || need+=(prometheus)  # promtool: alert rules
fi
# the fault suite's failover cluster (tests/system/faults/ha.py): Patroni and its store, etcd
if [ "$mode" = test ] || [ -n "${RMS_FAILOVER_DEPS:-}" ]; then
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
