#!/usr/bin/env bash
# Installs the Debian packages the test suite needs when they are missing:
# a Java runtime for Spark, the PostgreSQL JDBC driver, and Chromium for the dashboard test.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
[ -f /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
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
