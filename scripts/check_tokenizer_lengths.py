#!/usr/bin/env python3
"""Checks tpscope's exact-length prompts against the Python `tokenizers` package.

For each committed Hugging Face fixture (crates/tokens/tests/data/*/tokenizer.json),
runs the `exact_prompts` example, and asserts that the reference implementation
counts every prompt at exactly the asked length (no special tokens added), and that
tpscope's own count agrees.

Usage: python3 scripts/check_tokenizer_lengths.py   (needs `pip install tokenizers`)
"""
import json
import pathlib
import subprocess
import sys

from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "crates" / "tokens" / "tests" / "data"
LENGTHS = ["1", "2", "17", "128", "1000", "4096"]


def main() -> int:
    bad = 0
    dirs = sorted(p.parent for p in DATA.glob("*/tokenizer.json"))
    if not dirs:
        print(f"no tokenizer.json under {DATA}", file=sys.stderr)
        return 1
    for d in dirs:
        ref = Tokenizer.from_file(str(d / "tokenizer.json"))
        out = subprocess.run(
            ["cargo", "run", "-q", "-p", "tpscope-tokens", "--example", "exact_prompts",
             "--", f"hf:{d}", *LENGTHS],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
        checked = 0
        for line in out.splitlines():
            rec = json.loads(line)
            got = len(ref.encode(rec["text"], add_special_tokens=False).ids)
            if got != rec["n"] or rec["counted"] != rec["n"]:
                bad += 1
                print(f"{d.name}: n={rec['n']} seed={rec['seed']}: tokenizers counts {got}, "
                      f"tpscope {rec['counted']}", file=sys.stderr)
            checked += 1
        print(f"{d.name}: {checked} prompts checked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
