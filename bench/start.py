"""Where the start of `grader grade` and `grader check` goes, phase by phase, from the real commands.

    python bench/start.py                  # ~1-2 min on 2 cores: grade 1 and 40 submissions, check one
    python bench/start.py --rounds 3 -n 40
    python bench/start.py --ab OTHER_TREE  # also another checkout's grader, alternating (A/B)
    python bench/run.py --start            # the same, from the main benchmark

Each command runs as a subprocess with GRADER_TIMINGS=FILE: the grader marks each phase it reaches
(`grader/timings.py`; the zygote reports when it had imported torch and warmed up), and the phases
below are the intervals between those marks, measured from the launch of the command. Each round
runs every variant once, alternating (these machines drift): the setup cache off (`--no-cache`),
cold (an empty cache folder: computed and written) and warm (read back). Also in each round: a
cold `python -c "import torch"`, the floor `grader check` is compared with. With ``--ab DIR``,
the grader in DIR (another checkout with the same marks, e.g. before a change) runs in every
round too, as `python -m grader` with PYTHONPATH=DIR, without cache options. Then the imports of
`grader check --help` and of a real `grader check` (`python -X importtime`), heaviest first.

Writes bench/out/start-<stamp>.json (every run's marks) and .md (the tables).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

import generate  # noqa: E402

VARIANTS = ("off", "cold", "warm")
"""The setup cache: --no-cache; an empty cache folder (computed, then written); a filled one (read)."""

# (label, first mark, second mark): an interval of the command's own marks. "launch" is the
# moment the bench started the command, "exit" the moment it ended; "first"/"last" of "result"
# are the first and the last result recorded.
PHASES = [
    ("python start + CLI imports", "launch", "cli"),
    ("zygote: spawn -> torch imported", "zygote.spawn", "zygote.torch"),
    ("zygote: warm-up (ops, meta device)", "zygote.torch", "zygote.warm"),
    ("grader imports (torch) / assignment loaded", "cli", "imports"),
    ("submissions read (intake)", "imports", "submissions.read"),
    ("reference setups (cache: {cache})", "setups.start", "setups.end"),
    ("sandbox start (zygote wait + self-test)", "sandbox.start", "sandbox.ready"),
    ("  waiting for the zygote", "sandbox.start", "zygote.ready"),
    ("  self-test: probe in a worker", "selftest.start", "selftest.probe"),
    ("  self-test: limit proofs", "selftest.probe", "selftest.end"),
    ("reference at 100 % in the jail", "reference.start", "reference.end"),
    ("first worker: slots start -> first result", "slots.start", "result.first"),
    ("all results: first -> last", "result.first", "result.last"),
    ("dashboard and exports", "outputs.start", "outputs.end"),
    ("check: grading the submission", "grade.start", "grade.end"),
    ("check: terminal lines and report", "grade.end", "report.written"),
    ("exit (after the last mark)", "last", "exit"),
    ("total wall", "launch", "exit"),
]


def grader_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "grader"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "grader"]


def timed_run(cmd: list[str], *, cache: str, cache_dir: Path, cwd: Path, tree: Path | None = None) -> dict:
    """Run `cmd` with GRADER_TIMINGS; its marks as {phase: seconds since launch} (first of each in
    the grader's own process, except results, which any slot may record). `tree`: run the grader
    of that checkout (`python -m grader`, no cache options)."""
    with tempfile.NamedTemporaryFile(prefix="grader-timings-", suffix=".jsonl", delete=False) as f:
        marks_file = Path(f.name)
    env = dict(os.environ, GRADER_TIMINGS=str(marks_file))
    env.pop("GRADER_NO_CACHE", None)
    env.pop("GRADER_CACHE_DIR", None)
    if tree is not None:
        # Run from that tree too: `python -m` puts the working folder first on sys.path, where
        # this checkout's grader would shadow the one on PYTHONPATH.
        env["PYTHONPATH"] = str(tree)
        cmd = [sys.executable, "-m", "grader"] + cmd[len(grader_cmd()):]
        cwd = tree
        extra = []
    else:
        extra = ["--no-cache"] if cache == "off" else ["--cache-dir", str(cache_dir)]
    t0 = time.time()
    p = subprocess.run(cmd + extra, cwd=cwd, env=env, capture_output=True, text=True)
    t_exit = time.time()
    lines = [json.loads(x) for x in marks_file.read_text().splitlines() if x.strip()]
    marks_file.unlink()
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{(p.stderr or p.stdout)[-2000:]}")
    main_pid = next((m["pid"] for m in lines if m["phase"] == "cli"), None)
    at: dict[str, float] = {"launch": 0.0, "exit": t_exit - t0}
    info: dict[str, str] = {}
    for m in lines:
        name = m["phase"]
        if name == "result":
            at.setdefault("result.first", m["t"] - t0)
            at["result.last"] = m["t"] - t0
            continue
        if m["pid"] == main_pid and name not in at:
            at[name] = m["t"] - t0
            if name == "zygote.ready":  # the zygote's own clock, reported with its ready message
                for k in ("torch", "warm"):
                    if f"zygote_{k}" in m:
                        at[f"zygote.{k}"] = float(m[f"zygote_{k}"]) - t0
            if "cache" in m:
                info["cache"] = str(m["cache"])
    at["last"] = max(t for k, t in at.items() if k != "exit")
    return {"at": at, "info": info, "rc": p.returncode}


def interval(run: dict, a: str, b: str) -> float | None:
    at = run["at"]
    return at[b] - at[a] if a in at and b in at else None


def cold_torch() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.perf_counter() - t0


def import_times(cmd: list[str], runs: int = 3) -> list[tuple[str, float]]:
    """(top-level module, cumulative ms) of `python -X importtime` over `cmd`, the least of `runs`
    runs, heaviest first (modules a module imports are inside its own figure)."""
    best: dict[str, float] = {}
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-X", "importtime", *cmd], capture_output=True, text=True, cwd=REPO)
        for line in p.stderr.splitlines():
            parts = line.split("|")
            if len(parts) != 3 or not parts[1].strip().isdigit():
                continue
            name = parts[2].rstrip()
            depth = (len(name) - len(name.lstrip())) // 2
            if depth <= 1:
                us = int(parts[1])
                key = name.strip()
                best[key] = min(best.get(key, us), us)
    return sorted(((k, v / 1000) for k, v in best.items()), key=lambda kv: -kv[1])


def breakdown(n: int = 40, rounds: int = 2, jobs: int = 2, seed: int = 0, work: Path | None = None,
              other: Path | None = None, only: list[str] | None = None) -> dict:
    """Run every variant `rounds` times (and `other`'s grader, when given); returns the raw runs
    and the rendered tables. `only`: just these runs ("check / cold", "grade 1 / warm", ...)."""
    work = work or Path(tempfile.mkdtemp(prefix="grader-start-"))
    batch = work / "batch"
    generate.generate(batch, n, seed=seed)
    files = sorted(p for p in batch.iterdir() if p.suffix in (".py", ".ipynb"))
    # A notebook for the 1-submission run and a .py for check, where the draw made one of each
    # (a small -n may draw only one kind: then its first file serves both).
    one = next((p for p in files if p.suffix == ".ipynb"), files[0])
    py = next((p for p in files if p.suffix == ".py"), files[0])
    commands = {
        "grade 1": grader_cmd() + ["grade", str(one), "-a", "masked-attention", "-j", str(jobs), "--force",
                                   "-o", str(work / "out-1")],
        f"grade {n}": grader_cmd() + ["grade", str(batch), "-a", "masked-attention", "-j", str(jobs), "--force",
                                      "-o", str(work / f"out-{n}")],
        "check": grader_cmd() + ["check", str(py), "-a", "masked-attention", "-o", str(work / "check")],
    }
    variants = (["other"] if other is not None else []) + list(VARIANTS)
    runs: dict[str, list[dict]] = {f"{c} / {v}": [] for c in commands for v in variants}
    if only:
        unknown = [name for name in only if name not in runs]
        if unknown:
            raise SystemExit(f"--only: no run named {unknown[0]!r}; the runs are: {', '.join(runs)}")
        runs = {name: [] for name in runs if name in only}
    # Fill the warm cache (not counted) for the warm runs asked for: check caches the public cases'
    # setups, grade all of them (one file fills what the larger batch reads too).
    warm_dir = work / "cache-warm"
    if "check / warm" in runs:
        timed_run(commands["check"], cache="warm", cache_dir=warm_dir, cwd=REPO)
    if any(name.startswith("grade") and name.endswith("/ warm") for name in runs):
        timed_run(commands["grade 1"], cache="warm", cache_dir=warm_dir, cwd=REPO)
    torch_s: list[float] = []
    loads: list[str] = []
    for r in range(rounds):
        loads.append(_load())
        torch_s.append(cold_torch())
        for c, cmd in commands.items():
            for v in variants:
                if f"{c} / {v}" not in runs:
                    continue
                cold_dir = work / f"cache-cold-{r}-{c.replace(' ', '')}"
                shutil.rmtree(cold_dir, ignore_errors=True)
                runs[f"{c} / {v}"].append(timed_run(cmd, cache=v, cache_dir=warm_dir if v == "warm" else cold_dir,
                                                    cwd=REPO, tree=other if v == "other" else None))
        print(f"  round {r + 1}/{rounds} done (load {loads[-1]})", flush=True)
    imports_help = import_times(["-m", "grader", "check", "--help"])
    imports_check = import_times(["-m", "grader", "check", str(py), "-a", "masked-attention", "-o",
                                  str(work / "check-imports"), "--no-cache"], runs=1)
    result = {"runs": runs, "torch_import_s": torch_s, "loads": loads, "n": n, "jobs": jobs,
              "other": str(other) if other is not None else None,
              "imports_help": imports_help[:15], "imports_check": imports_check[:15]}
    result["markdown"] = render(result)
    return result


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def _median(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def render(res: dict) -> str:
    names = list(res["runs"])
    lines = [f"Start-up breakdown, seconds (median of {len(res['torch_import_s'])} rounds; load average "
             f"{', '.join(res['loads'])}): duration of each phase, and in brackets when it ended, from the "
             f"launch. Cache: off = --no-cache, cold = an empty cache folder (computed and written), "
             f"warm = read back"
             + (f"; other = the grader in {res['other']}, as it is." if res.get("other") else "."), "",
             "| phase | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    for label, a, b in PHASES:
        cells, seen = [], False
        for name in names:
            rs = res["runs"][name]
            d = _median([interval(r, a, b) for r in rs])
            end = _median([r["at"].get(b) for r in rs])
            cells.append("" if d is None else f"{d:.2f} ({end:.2f})" if b not in ("exit",) else f"{d:.2f}")
            seen |= d is not None
        if seen:
            caches = {r["info"].get("cache", "") for name in names for r in res["runs"][name]}
            lines.append(f"| {label.format(cache='/'.join(sorted(c for c in caches if c)) or '-')} | "
                         + " | ".join(cells) + " |")
    t = _median(res["torch_import_s"])
    checks = {name.split(" / ")[1]: _median([r["at"]["exit"] for r in rs]) for name, rs in res["runs"].items()
              if name.startswith("check / ")}
    lines += ["", f"Cold `python -c \"import torch\"`: {t:.2f} s (median)"
              + ("; `grader check` on one .py: " + ", ".join(f"cache {v} {s:.2f} s = {s / t:.2f}×"
                                                          for v, s in checks.items()) + " that." if checks else "."), ""]
    for title, rows in (("`python -X importtime -m grader check --help`", res["imports_help"]),
                        ("`python -X importtime -m grader check FILE` (the grader's process)", res["imports_check"])):
        lines += [f"Heaviest imports of {title}, cumulative ms (least of the runs):", "",
                  "| module | ms |", "| --- | --- |"] + [f"| {m} | {ms:.0f} |" for m, ms in rows[:12]] + [""]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=40, help="submissions in the larger batch [40]")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ab", type=Path, default=None, metavar="DIR",
                    help="also run the grader of this checkout in every round (A/B)")
    ap.add_argument("--only", action="append", metavar="RUN",
                    help='just this run, e.g. "check / cold" or "grade 1 / warm" (repeatable) [all]')
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    res = breakdown(args.n, args.rounds, args.jobs, args.seed, work=OUT / f"start-{stamp}", other=args.ab,
                    only=args.only)
    (OUT / f"start-{stamp}.json").write_text(json.dumps(res, indent=1))
    (OUT / f"start-{stamp}.md").write_text(res["markdown"])
    print(res["markdown"])
    print(f"wrote {OUT / f'start-{stamp}.md'} and .json")


if __name__ == "__main__":
    main()
