#!/usr/bin/env bash
# Creates .venv-litellm (at the workspace root) with LiteLLM's proxy server, for the
# `litellm` path of the relay benchmark (docs/proxy-bench.md):
#   scripts/litellm-venv.sh && cargo bench -p tpscope-proxy --bench relay -- --paths direct,tpscope,nginx,litellm
# The version is pinned: 1.81.13 predates the releases of LiteLLM's package that
# were withdrawn from PyPI as compromised (1.82.7, 1.82.8 and 1.107.0); change it
# only to a version checked against the project's security notices.
# Idempotent: an existing venv with that version importable is kept.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${LITELLM_VENV:-$root/.venv-litellm}"
version="1.81.13"
check="import importlib.metadata as m, litellm.proxy.proxy_server; print('litellm', m.version('litellm'))"

if [ -x "$venv/bin/litellm" ] && [ "$("$venv/bin/python" -c "$check" 2>/dev/null)" = "litellm $version" ]; then
  echo "litellm $version already in $venv"
  exit 0
fi

bash "$root/scripts/make-venv.sh" "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: "litellm[proxy]==$version"
"$venv/bin/python" -c "$check"
echo "installed in $venv"
