#!/usr/bin/env bash
# Creates .venv-sdk (at the workspace root) with the official `openai` and
# `anthropic` Python SDKs, for the SDK tests of `tpscope sim` and `tpscope proxy`:
#   TPSCOPE_OPENAI_PYTHON=$PWD/.venv-sdk/bin/python cargo test -p tpscope-sim -- --ignored
#   TPSCOPE_OPENAI_PYTHON=$PWD/.venv-sdk/bin/python cargo test -p tpscope-proxy -- --ignored
# Idempotent: an existing venv with both importable is kept.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv-sdk"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import openai, anthropic" >/dev/null 2>&1; then
  "$venv/bin/python" -c "import openai, anthropic; print('openai', openai.__version__, 'anthropic', anthropic.__version__, 'already in $venv')"
  exit 0
fi

bash "$root/scripts/make-venv.sh" "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "openai>=1.40,<3" "anthropic>=0.40,<3"
"$venv/bin/python" -c "import openai, anthropic; print('openai', openai.__version__, 'anthropic', anthropic.__version__, 'installed in $venv')"
