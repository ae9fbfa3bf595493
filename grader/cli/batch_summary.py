"""What `grader grade` prints once the batch has run: counts, the class's statistics, where the
dashboard, the similarity report, the LMS imports and the gradebook are."""

from __future__ import annotations

import click

from grader.cli.courses import echo_similarity


def print_summary(result, cfg) -> None:
    """The lines after the progress: counts, class statistics, where each output went."""
    if result.interrupted:
        click.echo(f"Interrupted: {result.graded} graded and saved this run ({result.reused} reused); "
                   "run the same command again to grade the rest.", err=True)
        return
    where = f"--cluster {cfg.cluster}" if cfg.cluster else f"-j {cfg.jobs}"
    click.echo(f"{result.found} submission(s): {result.graded} graded, {result.reused} reused from the ledger, "
               f"{result.failed_to_load} failed to load, {len(result.errors)} not graded "
               f"({result.elapsed_s:.1f} s, {where}{', ' + result.isolation if result.isolation else ''})")
    s = result.summary
    if s is None:
        return
    earlier = f" ({result.earlier} from earlier runs)" if result.earlier else ""
    click.echo("")
    click.echo(f"  students {s.n}{earlier}   mean {s.mean:.1f}%   median {s.median:.1f}%   "
               f"failed to load {s.failed_to_load}")
    if s.concept_rates:
        click.echo("  most failed concepts:")
        for rate in s.concept_rates[:5]:
            click.echo(f"    {rate.concept:<22} {rate.students:>4}/{rate.total:<4} {rate.percent:5.1f}%")
    click.echo("")
    click.echo(f"Dashboard: {result.dashboard}")
    echo_similarity(result.similarity, result.similar_pairs, result.lms)
    click.echo(f"Gradebook: {result.gradebook}")
