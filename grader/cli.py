"""Command line: parse, call one function, echo, exit code. No grading logic lives here."""

from __future__ import annotations

import click

from grader import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="grader")
def main() -> None:
    """Grade attention assignments: causal and padding masks, masked attention,
    multi-head attention and KV-cache decoding.

    \b
    Students:     grader check my_attention.py
    Instructors:  grader grade submissions/ -a masked-attention -o reports/run1
    CI:           grader ci solution.py -a masked-attention --min-score 80
    """
