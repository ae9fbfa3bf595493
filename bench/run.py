"""Benchmark `grader grade` against the floor, a cold `python` per file, nbgrader and otter-grader.

    python bench/run.py --quick            # < 10 min on 2 cores: the 200-submission batch graded twice, peers on 12 / 20 notebooks
    python bench/run.py                    # the same, with peers on 40 / 20 notebooks
    python bench/run.py --no-peers         # ours, the floor and the cold baseline only
    python bench/run.py --scale 1000       # 1,000 .py submissions in one run: RSS over time, output usable
    python bench/run.py --start            # only the start-up breakdown (bench/start.py): ~1-2 min

Everything is compared in the same run, in alternating rounds (ours, cold, nbgrader, otter, ours,
...), because these machines drift by 15-18 % between runs. Ratios are the headline. Writes
bench/out/results-<stamp>.json (raw) and bench/out/results-<stamp>.md (the table). Every comparison
ends with the start-up breakdown of bench/start.py (grade 1 and 40, check; one round with --quick).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

import generate  # noqa: E402
import peers_install  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


# --- measuring a process tree ----------------------------------------------------------------------

def _children_table() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def tree(root: int) -> list[int]:
    kids = _children_table()
    out, todo = [root], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class TreeSampler(threading.Thread):
    """Every `every` s: the sum of RSS over a process and all its descendants (PSS every 10th sample:
    forked workers share torch's pages, which an RSS sum counts once per process)."""

    def __init__(self, pid: int, every: float = 0.05):
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, int, int, int]] = []  # (t, rss sum, pss sum or -1, processes)
        self._halt = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        i = 0
        while not self._halt.is_set():
            pids = tree(self.pid)
            rss = sum(_rss(p) for p in pids)
            pss = sum(_pss(p) for p in pids) if i % 10 == 0 else -1
            self.samples.append((time.monotonic() - self.t0, rss, pss, len(pids)))
            i += 1
            self._halt.wait(self.every)

    def stop(self) -> None:
        self._halt.set()
        self.join()

    @property
    def peak_rss(self) -> int:
        return max((s[1] for s in self.samples), default=0)

    @property
    def peak_pss(self) -> int:
        return max((s[2] for s in self.samples), default=0)


def run_measured(cmd: list[str], *, cwd=None, env=None, on_line=None, timeout=None) -> dict:
    """Run cmd, sampling its tree's memory; stdout+stderr lines go to on_line(t, line)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         bufsize=1)
    s = TreeSampler(p.pid)
    s.start()
    lines = []
    for line in p.stdout:
        lines.append(line)
        if on_line:
            on_line(time.perf_counter() - t0, line)
    rc = p.wait(timeout=timeout)
    wall = time.perf_counter() - t0
    s.stop()
    return {"rc": rc, "wall_s": wall, "peak_rss": s.peak_rss, "peak_pss": s.peak_pss, "samples": s.samples,
            "tail": "".join(lines[-15:])}


def pctl(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def grader_cmd() -> list[str]:
    """The `grader` entry point of the environment running the bench, as an instructor's venv runs it
    (not a version manager's shim on PATH, e.g. pyenv's, which is a shell script that costs ~0.1 s)."""
    exe = Path(sys.executable).parent / "grader"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "grader"]


LINE = re.compile(r"^\[(\d+)/(\d+)\] (\S+) (\S+)%?(?: \(failed to load\))? \((\d+(?:\.\d+)?) s\)")


# --- the contenders ----------------------------------------------------------------------------------

def ours(batch: Path, out_dir: Path, jobs: int = 2) -> dict:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    per_sub, done_at = [], []

    def on_line(t, line):
        m = LINE.match(line.strip())
        if m:
            per_sub.append(float(m.group(5)))
            done_at.append((int(m.group(1)), t))

    r = run_measured(grader_cmd() + ["grade", str(batch), "-a", "masked-attention", "-o", str(out_dir),
                                     "-j", str(jobs), "--force"], cwd=REPO, on_line=on_line)
    if r["rc"] != 0:
        raise RuntimeError(f"grader grade exited {r['rc']}:\n{r['tail']}")
    r.update(per_sub_s=per_sub, done_at=done_at, n=len(per_sub))
    # steady state: between the first and the last graded submission (start-up and dashboard excluded)
    if len(done_at) > 2:
        r["steady_s"] = done_at[-1][1] - done_at[0][1]
        r["steady_n"] = len(done_at) - 1
    return r


def cold(files: list[Path]) -> dict:
    walls, passed, peak = [], {}, 0
    for f in files:
        r = run_measured([sys.executable, str(HERE / "cold_one.py"), str(f)])
        walls.append(r["wall_s"])
        peak = max(peak, r["peak_rss"])
        try:
            passed[f.name] = json.loads(r["tail"].strip().splitlines()[-1])["passed"]
        except (ValueError, IndexError, KeyError):
            passed[f.name] = None
    return {"n": len(files), "wall_s": sum(walls), "per_sub_s": walls, "peak_rss": peak, "passed": passed}


def nbgrader(notebooks: list[Path], root: Path, log, concede: bool) -> dict:
    import peers

    students = peers.nbgrader_setup(root, notebooks, log, concede=concede)
    env = peers._env("nbgrader")
    t0 = time.perf_counter()
    r = run_measured([str(peers_install.venv_dir("nbgrader") / "bin" / "nbgrader"), "autograde",
                      peers.ASSIGNMENT, "--force"], cwd=root, env=env)
    log.write(r["tail"])
    if r["rc"] != 0:
        raise RuntimeError(f"nbgrader autograde exited {r['rc']}:\n{r['tail']}")
    _, scores = peers.nbgrader_scores(root)
    passed = {nb.name: scores.get(s) for nb, s in zip(notebooks, students)}
    return {"n": len(notebooks), "wall_s": r["wall_s"], "per_sub_s": [r["wall_s"] / len(notebooks)] * len(notebooks),
            "peak_rss": r["peak_rss"], "peak_pss": r["peak_pss"], "passed": passed,
            "setup_s": time.perf_counter() - t0 - r["wall_s"]}


def otter(notebooks: list[Path], root: Path, zip_path: Path, log, concede: bool) -> dict:
    import peers

    walls, passed, peak = [], {}, 0
    for nb in notebooks:
        work, cmd = peers.otter_cmd(root, zip_path, nb, concede=concede)
        r = run_measured(cmd, cwd=work, env=peers._env("otter"))
        log.write(r["tail"])
        walls.append(r["wall_s"])
        peak = max(peak, r["peak_rss"])
        score = peers.otter_score(work)
        passed[nb.name] = None if score is None else round(score * 8)
    return {"n": len(notebooks), "wall_s": sum(walls), "per_sub_s": walls, "peak_rss": peak, "passed": passed}


def inproc(mode: str, batch: Path, out: Path, limit: int | None = None) -> dict:
    cmd = [sys.executable, str(HERE / "inproc.py"), mode, str(batch), str(out)]
    if limit:
        cmd += ["--limit", str(limit)]
    subprocess.run(cmd, check=True, cwd=REPO)
    return json.loads(out.read_text())


def check_cold(py_file: Path, runs: int = 3) -> dict:
    times, rc = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(grader_cmd() + ["check", str(py_file), "-a", "masked-attention"], cwd=REPO,
                           capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        rc = p.returncode
        if rc not in (0, 1):
            return {"skipped": f"`grader check` exited {rc}: {(p.stderr or p.stdout)[-300:]}"}
    return {"runs": times, "median_s": statistics.median(times), "rc": rc}


# --- environment -------------------------------------------------------------------------------------

def hardware() -> dict:
    model = ""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    import torch

    def ver(cmd):
        """The version number a `--version` prints (`grader, version 0.1.0` -> `0.1.0`)."""
        try:
            line = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout.strip().splitlines()[-1]
        except Exception:  # noqa: BLE001
            return "n/a"
        m = re.search(r"\d+(?:\.\d+)+\S*", line)
        return m.group(0) if m else line

    return {"date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"), "nproc": os.cpu_count(), "cpu": model,
            "mem_gib": round(mem / 2**30, 1), "python": platform.python_version(), "torch": torch.__version__,
            "kernel": platform.release(),
            "grader": ver(grader_cmd() + ["--version"]),
            "nbgrader": ver([str(peers_install.venv_dir("nbgrader") / "bin" / "nbgrader"), "--version"])
            if peers_install.is_ready("nbgrader") else "not installed",
            "otter": ver([str(peers_install.venv_dir("otter") / "bin" / "python"), "-c",
                          "import otter; print(otter.__version__)"])
            if peers_install.is_ready("otter") else "not installed"}


# --- the comparison ----------------------------------------------------------------------------------

def expected_right(manifest: dict, name: str, percent: float | None) -> bool:
    if percent is None:
        return False
    return (percent >= 99.999) == (not manifest[name]["buggy"])


def main_compare(args) -> dict:
    n = args.n or 200
    rounds = args.rounds or 2  # each round grades the whole batch with one `grader grade`
    n_nbg = args.nbgrader_n or (20 if args.quick else 40)
    n_ott = args.otter_n or (12 if args.quick else 20)
    n_cold = args.cold_n or (12 if args.quick else 30)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = OUT / f"run-{stamp}"
    work.mkdir(parents=True)
    log = open(work / "peers.log", "w")
    t_start = time.perf_counter()

    peers_ok = {}
    if args.peers:
        for name in ("nbgrader", "otter"):
            print(f"installing {name} (cached after the first run) ...", flush=True)
            ok, msg = peers_install.install(name)
            print("  " + msg, flush=True)
            peers_ok[name] = ok
            if not ok:
                print(f"  SKIPPING {name}: it could not be installed ({msg})", flush=True)

    batch = work / "batch"
    manifest = generate.generate(batch, n, seed=args.seed)
    files = sorted(p for p in batch.iterdir() if p.suffix in (".py", ".ipynb"))
    pys = [p for p in files if p.suffix == ".py"]
    nbs = [p for p in files if p.suffix == ".ipynb"]
    print(f"batch: {len(files)} submissions ({len(nbs)} notebooks, "
          f"{sum(v['buggy'] for v in manifest.values())} buggy) in {batch}", flush=True)

    def chunks(xs, k):
        return [xs[i::k] for i in range(k)]

    # each round grades the whole batch (ours: one `grader grade`, as an instructor would) and its
    # share of the .py files (cold) and of the notebooks (peers)
    cold_chunks = chunks(pys[:n_cold], rounds)
    nbg_chunks = chunks(nbs[:n_nbg], rounds)
    ott_chunks = chunks(nbs[:n_ott], rounds)
    otter_zip = None
    if peers_ok.get("otter"):
        import peers
        otter_zip = peers.otter_setup(work / "otter", log)

    res: dict[str, list[dict]] = {"ours": [], "cold": [], "nbgrader": [], "otter": []}
    for r in range(rounds):
        print(f"round {r + 1}/{rounds}", flush=True)
        o = ours(batch, work / f"ours-out-r{r}", jobs=args.jobs)
        o["files"] = [f.name for f in files]
        res["ours"].append(o)
        print(f"  ours      {o['n']:4d} in {o['wall_s']:6.1f} s", flush=True)
        c = cold(cold_chunks[r])
        res["cold"].append(c)
        print(f"  cold      {c['n']:4d} in {c['wall_s']:6.1f} s", flush=True)
        if peers_ok.get("nbgrader") and nbg_chunks[r]:
            try:
                g = nbgrader(nbg_chunks[r], work / f"nbgrader-r{r}", log, args.peer_concessions)
                res["nbgrader"].append(g)
                print(f"  nbgrader  {g['n']:4d} in {g['wall_s']:6.1f} s", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"  nbgrader failed, skipped: {e}", flush=True)
                peers_ok["nbgrader"] = False
        if otter_zip and ott_chunks[r]:
            t = otter(ott_chunks[r], work / "otter", otter_zip, log, args.peer_concessions)
            res["otter"].append(t)
            print(f"  otter     {t['n']:4d} in {t['wall_s']:6.1f} s", flush=True)

    print("floor and profile passes (in-process, Python API) ...", flush=True)
    floor = inproc("floor", batch, work / "floor.json")
    prof = inproc("profile", batch, work / "profile.json", limit=min(len(files), 40))
    chk = check_cold(pys[0]) if pys else {"skipped": "no .py"}
    print("start-up breakdown (bench/start.py) ...", flush=True)
    import start as start_bench

    startup = start_bench.breakdown(n=40, rounds=1 if args.quick else 2, jobs=args.jobs, seed=args.seed,
                                    work=work / "start")

    # --- aggregate ---
    def agg(name):
        rs = res[name]
        if not rs:
            return None
        nn = sum(x["n"] for x in rs)
        wall = sum(x["wall_s"] for x in rs)
        per = [t for x in rs for t in x["per_sub_s"]]
        steady = (sum(x["steady_n"] for x in rs) / sum(x["steady_s"] for x in rs)
                  if all("steady_s" in x for x in rs) else None)
        return {"n": nn, "wall_s": wall, "throughput": nn / wall, "steady_throughput": steady, "median_s": statistics.median(per),
                "p95_s": pctl(per, 0.95), "peak_rss": max(x["peak_rss"] for x in rs),
                "peak_pss": max(x.get("peak_pss", -1) for x in rs)}

    table = {k: agg(k) for k in res}
    # correctness: ours against the manifest (correct = 100 %); peers against the 8 checks run in-process
    ours_right = sum(expected_right(manifest, f, _our_percent(work / f"ours-out-r{r}", f))
                     for r, o in enumerate(res["ours"]) for f in o["files"])
    table["ours"]["right"] = f"{ours_right}/{table['ours']['n']}"
    for name in ("cold", "nbgrader", "otter"):
        if table[name]:
            got = {k: v for x in res[name] for k, v in x["passed"].items()}
            ok = sum(got[k] is not None and round(float(got[k])) == floor["peer_passed"][k] for k in got)
            table[name]["right"] = f"{ok}/{len(got)}"
    ovh_ms = (prof["split_per_sub_ms"].get("worker start (fork + jail)", 0)
              + prof["split_per_sub_ms"].get("worker stop", 0))
    report = {"hardware": hardware(), "args": vars(args), "table": table, "floor": {k: v for k, v in floor.items()
              if k not in ("per_sub_s", "scores", "peer_passed")}, "profile": prof, "check": chk,
              "worker_start_stop_ms": ovh_ms, "total_s": time.perf_counter() - t_start, "start": startup,
              "raw": {k: [{kk: vv for kk, vv in x.items() if kk != "samples"} for x in v] for k, v in res.items()}}
    md = render(report) + "\n" + startup["markdown"]
    (OUT / f"results-{stamp}.json").write_text(json.dumps(report, indent=1, default=str))
    (OUT / f"results-{stamp}.md").write_text(md)
    print(md)
    print(f"wrote {OUT / f'results-{stamp}.md'} and .json ({report['total_s']:.0f} s)")
    return report


def _our_percent(out_dir: Path, filename: str) -> float | None:
    """Our percent for one file, from a round's results/<id>.json."""
    from grader.submission.ids import student_id

    p = out_dir / "results" / f"{student_id(filename)}.json"
    if not p.is_file():
        return None
    s = json.loads(p.read_text())["score"]
    return 100.0 * s["earned"] / s["possible"] if s.get("possible") else None


def _case_count() -> int:
    """Case instances of the benchmarked assignment (public and hidden), as graded now."""
    from grader.assignment.spec import load_assignment

    return len(load_assignment("masked-attention").instances())


def _class_sizes(rep: dict) -> list[str]:
    """The ratios at 40 and at 200 submissions, whole batch against whole batch: ours at 40 is the
    start breakdown's `grade 40` (its own generated batch, half notebooks), the peers' 40 their
    measured seconds per notebook times 40 (they grade one notebook after another)."""
    t, runs = rep["table"], rep["start"]["runs"]
    n = rep["start"]["n"]
    ours_at_n = {v: statistics.median(r["at"]["exit"] for r in runs[f"grade {n} / {v}"])
                 for v in ("warm", "off") if runs.get(f"grade {n} / {v}")}
    peers = {k: t[k]["wall_s"] / t[k]["n"] for k in ("nbgrader", "otter") if t.get(k)}
    if not ours_at_n or not peers:
        return []
    lines = ["", f"By class size, whole batch against whole batch: at {n}, `grader grade` "
             + ", ".join(f"{s:.1f} s (setup cache {v})" for v, s in ours_at_n.items()) + " against "
             + ", ".join(f"{k} {n} × {per:.2f} s = {n * per:.0f} s" for k, per in peers.items()) + ": "
             + "; ".join(f"{k} {n * per / s:.0f}× (cache {v})" for k, per in peers.items() for v, s in ours_at_n.items())
             + f". At {t['ours']['n'] // len(rep['raw']['ours'])} (one `grader grade` per round): "
             + ", ".join(f"{t['ours']['throughput'] / t[k]['throughput']:.0f}× {k}" for k in peers) + "."]
    return lines


def render(rep: dict) -> str:
    h, t, fl, pr = rep["hardware"], rep["table"], rep["floor"], rep["profile"]
    ours = t["ours"]
    lines = [f"Run {h['date']}: {h['nproc']} CPUs ({h['cpu']}), {h['mem_gib']} GiB, Linux {h['kernel']}, "
             f"Python {h['python']}, torch {h['torch']}, grader {h['grader']}, nbgrader {h['nbgrader']}, "
             f"otter-grader {h['otter']}.", "",
             "| grader | submissions | batch wall s | per submission s (median / p95) | throughput /s "
             "| ours is × faster | peak RSS of tree MB (sum RSS / PSS) | scores right |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    n_cases = _case_count()
    names = {"ours": f"**ours** `grader grade -j {rep['args']['jobs']}` ({n_cases} cases, sandboxed)",
             "cold": "fresh `python` per `.py` (8 checks)",
             "nbgrader": "nbgrader 0.9.6 `autograde` (8 checks)",
             "otter": "otter-grader 7.0.0 `otter run` (8 checks)"}
    for k in ("ours", "cold", "nbgrader", "otter"):
        r = t.get(k)
        if not r:
            lines.append(f"| {names[k]} | skipped | | | | | | |")
            continue
        pss = f" / {r['peak_pss'] / 2**20:.0f}" if r.get("peak_pss", -1) > 0 else ""
        ratio = "1" if k == "ours" else f"{ours['throughput'] / r['throughput']:.0f}"
        rounds = len(rep["raw"][k])
        count = f"{rounds} × {r['n'] // rounds}" if k == "ours" and rounds > 1 else f"{r['n']}"
        lines.append(f"| {names[k]} | {count} | {r['wall_s']:.1f} | {r['median_s']:.3f} / {r['p95_s']:.3f} | "
                     f"{r['throughput']:.2f} | {ratio} | "
                     f"{r['peak_rss'] / 2**20:.0f}{pss} | {r.get('right', '')} |")
    if t.get("nbgrader") or t.get("otter"):
        lines += ["", "nbgrader and otter ran copies of the notebooks with the `!pip install torch` and `%matplotlib "
                  "inline` lines commented out (--peer-concessions: faster for them)."
                  if rep["args"].get("peer_concessions") else
                  "nbgrader and otter ran the notebooks as they are: their kernels execute `!pip install torch` "
                  "(already installed) and `%matplotlib inline`; ours runs no shell line or magic."]
    if ours.get("steady_throughput"):
        st = ours["steady_throughput"]
        lines += ["", f"Ours in steady state (first to last graded, without the ~{ours['wall_s'] / len(rep['raw']['ours']) - ours['n'] / len(rep['raw']['ours']) / st:.0f} s "
                  f"of start-up and dashboard per batch): {st:.2f} submissions/s = "
                  + ", ".join(f"{st / t[k]['throughput']:.0f}× {k}" for k in ("cold", "nbgrader", "otter") if t.get(k))
                  + " (whole-batch throughput above includes start-up, so it depends on batch size)."]
    lines += _class_sizes(rep)
    ws = rep["worker_start_stop_ms"] / 1000
    lines += ["", f"Floor (same {n_cases} cases + diagnosis, one warm process, no isolation): "
              f"{fl['median_s'] * 1000:.0f} ms median per submission (p95 {fl['p95_s'] * 1000:.0f} ms); "
              f"the 8 peer checks alone: {fl['peer_checks_median_s'] * 1000:.1f} ms.",
              f"Worker start + stop (fork from the zygote, jail, kill, reap): {ws * 1000:.0f} ms per submission.",
              f"Ours, -j 1 in-process profile: {pr['median_s'] * 1000:.0f} ms median per submission "
              f"= {pr['median_s'] / (fl['median_s'] + ws):.1f}× (floor + worker start/stop); "
              f"CLI -j {rep['args']['jobs']} median {ours['median_s'] * 1000:.0f} ms per submission (slot wall, 0.1 s "
              f"resolution).",
              ]
    chk = rep["check"]
    lines.append(f"`grader check` on one .py, cold: {chk['median_s']:.2f} s median of {len(chk['runs'])}."
                 if "median_s" in chk else f"`grader check`: {chk.get('skipped')}")
    lines += ["", "Where the time goes (-j 1 profile of the real `run_batch`, ms per submission; "
              "'once' rows are per batch, spread over its submissions):", "",
              "| step | ms per submission |", "| --- | --- |"]
    for k, v in sorted(pr["split_per_sub_ms"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {k} | {v:.1f} |")
    lines.append(f"| **total (profile wall / n)** | {1000 * pr['wall_s'] / pr['n']:.1f} |")
    return "\n".join(lines) + "\n"


# --- scale --------------------------------------------------------------------------------------------

def main_scale(args) -> dict:
    n = args.scale
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = OUT / f"scale-{stamp}"
    batch = work / "batch"
    generate.generate(batch, n, seed=args.seed, only_py=True)
    print(f"grading {n} generated .py submissions with -j {args.jobs} ...", flush=True)
    o = ours(batch, work / "out", jobs=args.jobs)
    samples = o["samples"]
    done_at = o["done_at"]

    def rss_at(k):
        t = next((t for d, t in done_at if d >= k), None)
        if t is None:
            return None
        window = [s for s in samples if t - 5.0 <= s[0] <= t]
        return {"t_s": round(t, 1), "rss_mb": round(max(s[1] for s in window) / 2**20),
                "pss_mb": round(max((s[2] for s in window if s[2] > 0), default=-1) / 2**20)}

    marks = {k: rss_at(k) for k in (100, 500, 1000, n) if k <= n}
    out = work / "out"
    idx = out / "index.html"
    with open(out / "grades.csv") as f:
        rows = list(csv.reader(f))
    results = len(list((out / "results").glob("*.json")))
    rep = {"hardware": hardware(), "n": n, "graded": o["n"], "wall_s": o["wall_s"], "throughput": o["n"] / o["wall_s"],
           "steady_throughput": o.get("steady_n", 0) / o["steady_s"] if o.get("steady_s") else None,
           "peak_rss_mb": o["peak_rss"] / 2**20, "peak_pss_mb": o["peak_pss"] / 2**20, "rss_at_done": marks,
           "index_html_bytes": idx.stat().st_size if idx.exists() else None, "grades_csv_rows": len(rows) - 1,
           "results_json": results, "per_sub_median_s": statistics.median(o["per_sub_s"]),
           "series": [(round(s[0], 2), s[1], s[2], s[3]) for s in samples[::20]]}
    ok = (rep["graded"] == n and rep["grades_csv_rows"] == n and results == n and idx.exists())
    rep["output_ok"] = ok
    (OUT / f"scale-{stamp}.json").write_text(json.dumps(rep, indent=1))
    print(f"{rep['graded']}/{n} graded in {rep['wall_s']:.0f} s ({rep['throughput']:.1f}/s); "
          f"peak RSS of the tree {rep['peak_rss_mb']:.0f} MB (PSS {rep['peak_pss_mb']:.0f} MB)")
    for k, v in marks.items():
        print(f"  after {k:5d} graded: {v}")
    print(f"  index.html {rep['index_html_bytes']} bytes; grades.csv {rep['grades_csv_rows']} rows; "
          f"{results} result JSONs; output usable: {ok}")
    print(f"wrote {OUT / f'scale-{stamp}.json'}")
    return rep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="under 10 minutes on 2 cores")
    ap.add_argument("-n", type=int, default=None, help="submissions in the batch; each round grades all of them [200]")
    ap.add_argument("--peers", action=argparse.BooleanOptionalAction, default=True,
                    help="install and run nbgrader and otter-grader")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--nbgrader-n", type=int, default=None)
    ap.add_argument("--otter-n", type=int, default=None)
    ap.add_argument("--cold-n", type=int, default=None)
    ap.add_argument("--peer-concessions", action="store_true",
                    help="give nbgrader and otter copies of the notebooks with the `!pip` and `%%matplotlib` "
                         "lines commented out (faster for them) instead of the notebooks as they are")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=int, default=None, metavar="N", help="the scale check on N .py submissions")
    ap.add_argument("--start", action="store_true", help="only the start-up breakdown (bench/start.py)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    # Byte-compile the grader as `pip install` does (this checkout may run with PYTHONDONTWRITEBYTECODE).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "grader"), str(REPO / "reference"),
                    str(REPO / "assignments")], stdout=subprocess.DEVNULL, check=False)
    if args.start:
        import start as start_bench

        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        res = start_bench.breakdown(n=40, rounds=args.rounds or 2, jobs=args.jobs, seed=args.seed,
                                    work=OUT / f"start-{stamp}")
        (OUT / f"start-{stamp}.json").write_text(json.dumps(res, indent=1))
        (OUT / f"start-{stamp}.md").write_text(res["markdown"])
        print(res["markdown"])
    elif args.scale:
        main_scale(args)
    else:
        main_compare(args)


if __name__ == "__main__":
    main()
