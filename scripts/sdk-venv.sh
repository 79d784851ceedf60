#!/usr/bin/env bash
# Creates .venv-sdk (at the workspace root) with the official `openai` Python SDK,
# for the SDK test of `tpscope sim`:
#   TPSCOPE_OPENAI_PYTHON=$PWD/.venv-sdk/bin/python cargo test -p tpscope-sim -- --ignored
# Idempotent: an existing venv with openai importable is kept.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv-sdk"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import openai" >/dev/null 2>&1; then
  "$venv/bin/python" -c "import openai; print('openai', openai.__version__, 'already in $venv')"
  exit 0
fi

bash "$root/scripts/make-venv.sh" "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "openai>=1.40,<3"
"$venv/bin/python" -c "import openai; print('openai', openai.__version__, 'installed in $venv')"
