#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine with Python 3.11, Java 17 and Maven, run as root:
# the Debian packages the stack needs, a virtual environment in .venv with the project installed
# into it, and the JVM parts deploy/jvm/pom.xml pins (Apache Kafka and its tools, Spark's Kafka
# connector) fetched from Maven Central into .jvm/. Sourced by run-local and run-tests; prints
# what it does, and nothing when all is done already (`run-local status` prints its answer alone).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' 2>/dev/null \
  || { echo "Python 3.11 or newer is needed as $PYTHON" >&2; exit 1; }
command -v java >/dev/null || { echo "Java 17 is needed for Spark (java not on PATH)" >&2; exit 1; }

APT_PACKAGES=(prometheus prometheus-pushgateway prometheus-alertmanager iptables)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # the packages start system services; the project runs its own on free ports
  for svc in prometheus prometheus-pushgateway prometheus-alertmanager prometheus-node-exporter; do
    $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || $SUDO service "$svc" stop >/dev/null 2>&1 || true
  done
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.installed-$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  say "installing the project and its dependencies into $VENV (a few minutes the first time)"
  log="$VENV/pip-install.log"
  { "$VENV/bin/pip" install --upgrade pip && "$VENV/bin/pip" install -e "$ROOT[test,docs]"; } >"$log" 2>&1 \
    || { tail -n 30 "$log" >&2; echo "pip install failed (full log: $log)" >&2; exit 1; }
  rm -f "$VENV"/.installed-* && touch "$stamp"
fi

# The JVM parts, one directory per profile of the manifest; a directory is fetched again when
# the manifest changes. Maven caches the artifacts in ~/.m2, so a new profile directory is a copy.
# Besides the pinned Kafka, the older Kafka lines the selected real-Kafka test matrix runs
# (QUORUM_KAFKA_MATRIX: CI's subset unless `full` or a list of shapes) and those
# QUORUM_KAFKA_VERSIONS names (e.g. "3.7.2 4.0.2", or "all"); quorum/local_kafka/kafka_shapes.py says which.
JVM_DIR="${QUORUM_JVM_DIR:-$ROOT/.jvm}"
manifest="$ROOT/deploy/jvm/pom.xml"
jvm_stamp="$(sha256sum "$manifest" | cut -c1-16)"
command -v mvn >/dev/null || { echo "Maven is needed to fetch the JVM parts (mvn not on PATH)" >&2; exit 1; }
kafka_profiles="$("$VENV/bin/python" -m quorum.local_kafka.kafka_shapes profiles)"
for profile in $kafka_profiles spark-kafka jmx-exporter; do
  dir="$JVM_DIR/$profile"
  [ -f "$dir/.fetched-$jvm_stamp" ] && continue
  say "fetching the JVM parts of profile '$profile' from Maven Central into $dir"
  # fetched beside the old directory and swapped in, so a JVM starting meanwhile finds jars
  rm -rf "$dir.partial"
  log="$JVM_DIR/mvn-$profile.log"
  mkdir -p "$JVM_DIR"
  if ! mvn -B -f "$manifest" -P "$profile" dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$dir.partial" >"$log" 2>&1; then
    grep -E "ERROR|Could not" "$log" | head -n 8 >&2
    echo "fetching the JVM parts of '$profile' failed: Maven could not resolve" \
         "$(grep -oE "Could not (resolve|find|transfer)[^:]*: [^ ]+" "$log" | head -n 1 | sed 's/.*: //')" \
         "(is Maven Central reachable?); full log: $log" >&2
    exit 1
  fi
  touch "$dir.partial/.fetched-$jvm_stamp"
  rm -rf "$dir.old" && { [ ! -d "$dir" ] || mv "$dir" "$dir.old"; } && mv "$dir.partial" "$dir" && rm -rf "$dir.old"
done
export QUORUM_JVM_DIR="$JVM_DIR"
