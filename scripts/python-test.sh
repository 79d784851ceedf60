#!/usr/bin/env bash
# Builds and tests the `tpscope` Python package (python/) the way a user installs it:
# a fresh venv at .venv-py, `pip install ./python` (maturin builds the Rust module,
# release profile), the openai and anthropic SDKs and pytest; then the pytest suite
# against the `tpscope` binary (for `tpscope sim` and `tpscope report`), the recording guide's
# example (docs/recording.md), and the events/s benchmark with a short count (a smoke run, not a figure).
#   scripts/python-test.sh [pytest args...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="$root/.venv-py"

bash "$root/scripts/make-venv.sh" "$venv"
py="$venv/bin/python"
pip=("$py" -m pip install --quiet --disable-pip-version-check)
# opentelemetry-proto: the OTLP export test parses what tpscope sends with the official proto.
"${pip[@]}" "openai>=1.40,<4" pytest "opentelemetry-proto>=1.20"
# The anthropic SDK is optional: its test is skipped when it does not install.
"${pip[@]}" "anthropic>=0.30,<3" || echo "anthropic SDK not installed: its test will be skipped"
# pandas is optional too: tpscope.spans' DataFrame check runs when it installs.
"${pip[@]}" pandas || echo "pandas not installed: the DataFrame check will be skipped"
echo "== pip install ./python (maturin builds the native module)"
"${pip[@]}" --force-reinstall --no-deps ./python

echo "== the tpscope binary"
cargo build -q -p tpscope-cli
export TPSCOPE_BIN="$root/target/debug/tpscope"

echo "== pytest python/tests"
# From python/tests, so `import tpscope` is the installed package, not the source tree.
(cd python/tests && "$py" -m pytest -q -p no:cacheprovider "$@" .)

echo "== the Python example of docs/recording.md, read back by tpscope report"
example_dir=$(mktemp -d)
"$py" python/examples/pipeline.py "$example_dir/pipeline.jsonl"
"$TPSCOPE_BIN" report "$example_dir/pipeline.jsonl" >/dev/null
rm -rf "$example_dir"

echo "== the events/s benchmark (smoke run)"
"$py" python/bench/events.py --events 20000
