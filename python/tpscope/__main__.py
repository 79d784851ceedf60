"""`python -m tpscope report|compare ...`: the analysis commands of the `tpscope`
binary, run in this process by the package's native module (the same Rust reading,
analysis and rendering as `tpscope report` and `tpscope compare`, so the output is
the same bytes and compare's exit status the same: 0 pass, 1 fail, 3 inconclusive;
2 for bad input).

The other commands (`bench`, `sim`, `proxy`, `import`) need an HTTP client and
server that the importable module leaves out to stay small: they run the
`tpscope` binary ($TPSCOPE_BIN, or on PATH) when there is one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from typing import List, Optional

from . import TpscopeError, _tpscope

IN_PROCESS = ("report", "compare")


def _share(text: str) -> float:
    """`95%` or `0.95` (the CLI's share form)."""
    text = text.strip()
    if text.endswith("%"):
        return float(text[:-1]) / 100.0
    return float(text)


def _analysis_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", default="full", metavar="full|steady|FROM..TO")
    p.add_argument("--time-unit", metavar="s|ms|us|ns")
    p.add_argument("--skip-invalid", action="store_true")
    p.add_argument("--price-per-hour", type=float, metavar="PRICE")
    p.add_argument("--price-per-mtok-in", type=float, metavar="PRICE")
    p.add_argument("--price-per-mtok-out", type=float, metavar="PRICE")
    p.add_argument("--goodput", metavar="GOALS")
    p.add_argument("-o", "--output", metavar="FILE")


def _parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m tpscope",
        description="tpscope's report and compare, run by the Python package "
        "(bench, sim, proxy and import run the tpscope binary when installed).",
    )
    sub = top.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="analyse span logs")
    report.add_argument("files", nargs="+")
    report.add_argument("--format", default="text", choices=["text", "json", "markdown", "csv"])
    report.add_argument("--bucket", default="1s", metavar="DURATION")
    _analysis_flags(report)
    compare = sub.add_parser("compare", help="judge a candidate run against a baseline")
    compare.add_argument("files", nargs=2, metavar="BASELINE CANDIDATE")
    compare.add_argument("--format", default="text", choices=["text", "json", "markdown"])
    compare.add_argument("--baseline-run", metavar="RUN_ID")
    compare.add_argument("--candidate-run", metavar="RUN_ID")
    compare.add_argument("--resamples", type=int, default=2000, metavar="N")
    compare.add_argument("--seed", type=int, default=1, metavar="N")
    compare.add_argument("--confidence", type=_share, default=0.95, metavar="LEVEL")
    compare.add_argument("--min-tps-gain", type=_share, default=0.0, metavar="SHARE")
    compare.add_argument("--max-success-drop", type=_share, default=0.01, metavar="SHARE")
    compare.add_argument("--min-gap-drop", type=_share, default=0.0, metavar="SHARE")
    compare.add_argument("--max-retry-rise", type=float, default=0.01, metavar="N")
    compare.add_argument("--max-goodput-drop", type=_share, default=0.01, metavar="SHARE")
    compare.add_argument("--allow-mismatch", action="store_true")
    _analysis_flags(compare)
    return top


def _common(a: argparse.Namespace) -> dict:
    return dict(
        window=a.window,
        time_unit=a.time_unit,
        skip_invalid=a.skip_invalid,
        price_per_hour=a.price_per_hour,
        price_per_mtok_in=a.price_per_mtok_in,
        price_per_mtok_out=a.price_per_mtok_out,
        goodput=a.goodput,
        format=a.format,
    )


def _run(a: argparse.Namespace) -> int:
    if a.command == "report":
        out = _tpscope.analyze_json(a.files, bucket=a.bucket, **_common(a))
        status = 0
    else:
        out, status = _tpscope.compare_json(
            a.files[0],
            a.files[1],
            baseline_run=a.baseline_run,
            candidate_run=a.candidate_run,
            resamples=a.resamples,
            seed=a.seed,
            confidence=a.confidence,
            min_tps_gain=a.min_tps_gain,
            max_success_drop=a.max_success_drop,
            min_gap_drop=a.min_gap_drop,
            max_retry_rise=a.max_retry_rise,
            max_goodput_drop=a.max_goodput_drop,
            allow_mismatch=a.allow_mismatch,
            **_common(a),
        )
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(out)
    else:
        sys.stdout.write(out)
    return status


def _binary() -> Optional[str]:
    return os.environ.get("TPSCOPE_BIN") or shutil.which("tpscope")


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((x for x in argv if not x.startswith("-")), None)
    if command is not None and command not in IN_PROCESS:
        binary = _binary()
        if binary is None:
            sys.stderr.write(
                f"error: `{command}` needs the tpscope binary (an HTTP client and server "
                "the Python module leaves out); install it (cargo install --path crates/cli, "
                "or a release) or set TPSCOPE_BIN. `python -m tpscope report|compare` run "
                "here.\n"
            )
            return 2
        return subprocess.call([binary, *argv])
    a = _parser().parse_args(argv)
    try:
        return _run(a)
    except TpscopeError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    except OSError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
