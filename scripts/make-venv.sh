#!/usr/bin/env bash
# Creates a Python venv at $1 unless one is there (installing python3-venv on Debian,
# which splits ensurepip out of the interpreter). Used by sdk-venv.sh and python-test.sh.
set -euo pipefail
venv="$1"
[ -x "$venv/bin/python" ] && exit 0
if ! python3 -m venv "$venv" >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
