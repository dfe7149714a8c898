#!/usr/bin/env python3
"""Comparative CPU benchmark: ours vs Stan, nutpie, PyMC and NumPyro on the seven models.

    bench/setup.sh && .venv-bench/bin/python bench/run.py

For each model x framework, one worker process (``worker.py``) compiles the model, passes the
parity gate (``parity.py``; a failure is reported and that pair is not timed), warms up, then
runs the jobs {1, 4 chains} x seeds {1, 2, 3}, each 1000 warmup + 1000 draws, one job at a
time on the whole machine. Every finished job is one JSON line of ``bench/results/runs.jsonl``;
a rerun skips the jobs already there (``--fresh`` starts over). At the end ``report.py`` writes
``bench/results/cpu.md`` (tables) and ``bench/results/cpu.png`` (chart), and the Rust test
``bench_parity`` checks the saved parity fixtures against our evaluator.

Exit status: 0 if every gate passed and every job ran; 1 otherwise (after the report, listing
what failed).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import BENCH_DIR, FRAMEWORKS, MODELS, ROOT, WORK_DIR, rel  # noqa: E402

RESULTS_DIR = os.path.join(BENCH_DIR, "results")
PARITY_FAILED = 3


def csv_list(kind, allowed=None):
    def parse(text):
        values = [kind(v) for v in text.split(",") if v]
        if allowed is not None:
            bad = [v for v in values if v not in allowed]
            if bad:
                raise argparse.ArgumentTypeError(f"unknown {bad}; choose from {allowed}")
        return values
    return parse


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=csv_list(str, MODELS), default=MODELS)
    ap.add_argument("--frameworks", type=csv_list(str, FRAMEWORKS), default=FRAMEWORKS)
    ap.add_argument("--seeds", type=csv_list(int), default=[1, 2, 3])
    ap.add_argument("--chains", type=csv_list(int), default=[1, 4])
    ap.add_argument("--results", default=RESULTS_DIR, help="output folder (default bench/results)")
    ap.add_argument("--cluster-cli", default=None,
                    help="use this cluster-cli binary instead of building the working tree")
    ap.add_argument("--parity-only", action="store_true", help="run the gates, time nothing")
    ap.add_argument("--report-only", action="store_true", help="only rewrite cpu.md and cpu.png")
    ap.add_argument("--fresh", action="store_true",
                    help="discard cached runs, compile times and compiled Stan models first")
    ap.add_argument("--no-rust-gate", action="store_true",
                    help="skip `cargo test ... bench_parity` at the end")
    return ap.parse_args(argv)


def build_cluster_cli() -> str:
    """Builds ``cluster-cli`` (release) and copies it out of ``target/``, so that a rebuild of
    the tree during the benchmark cannot swap the binary under it."""
    print("building cluster-cli (cargo build --release -p cluster-cli)", flush=True)
    subprocess.run(["cargo", "build", "--release", "-p", "cluster-cli"], cwd=ROOT, check=True)
    os.makedirs(WORK_DIR, exist_ok=True)
    binary = os.path.join(WORK_DIR, "cluster-cli")
    shutil.copy2(os.path.join(ROOT, "target", "release", "cluster-cli"), binary)
    return binary


def git_revision() -> str:
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rev = git("rev-parse", "--short", "HEAD")
    return rev + (" (with uncommitted changes)" if git("status", "--porcelain") else "")


def read_runs(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def worker_env() -> dict:
    env = dict(os.environ)
    # httpstan's model cache inside the work folder: the first build of a model really compiles.
    env["XDG_CACHE_HOME"] = os.path.join(WORK_DIR, "cache")
    env.setdefault("PYTHONWARNINGS", "ignore")
    return env


def run_worker(framework, model, jobs, args, binary, log_dir) -> dict:
    """Runs one worker; returns its status (parity, compile time, error)."""
    status_path = os.path.join(WORK_DIR, "status", f"{framework}-{model}.json")
    os.makedirs(os.path.dirname(status_path), exist_ok=True)
    if os.path.exists(status_path):
        os.remove(status_path)
    cmd = [sys.executable, os.path.join(BENCH_DIR, "worker.py"), "--framework", framework,
           "--model", model, "--jobs", ",".join(f"{c}:{s}" for c, s in jobs),
           "--status", status_path, "--runs", os.path.join(args.results, "runs.jsonl")]
    if binary:
        cmd += ["--cluster-cli", binary]
    log_path = os.path.join(log_dir, f"{framework}-{model}.log")
    print(f"[{time.strftime('%H:%M:%S')}] {framework} / {model}: {len(jobs)} jobs "
          f"(load {os.getloadavg()[0]:.2f}; log {rel(log_path)})", flush=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=worker_env())
        for line in proc.stdout:
            print("   " + line.rstrip(), flush=True)
            log.write(line)
        code = proc.wait()
    status = {}
    if os.path.exists(status_path):
        with open(status_path) as f:
            status = json.load(f)
    status["exit_code"] = code
    if code == PARITY_FAILED:
        print(f"   PARITY GATE FAILED: {status.get('parity', {}).get('message')}", flush=True)
    elif code != 0:
        print(f"   WORKER FAILED (exit {code}); see {rel(log_path)}", flush=True)
    return status


def keep_first_compile(status: dict, path: str, key: str) -> None:
    """A resumed run finds Stan's models in httpstan's cache: keep the longest compile time
    seen (the real compilation), with every measurement in ``compile_seconds_seen``."""
    seen = []
    if os.path.exists(path):
        with open(path) as f:
            seen = json.load(f).get(key, {}).get("compile_seconds_seen", [])
    if "compile_seconds" in status:
        seen = seen + [status["compile_seconds"]]
    if seen:
        status["compile_seconds_seen"] = seen
        status["compile_seconds"] = max(seen)


def update_json(path: str, key: str, value: dict) -> None:
    data = {}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
    data[key] = value
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)


def rust_gate() -> bool:
    """Our evaluator against every saved fixture (the CI test), run here as well."""
    cmd = ["cargo", "test", "--release", "-p", "sampler", "--test", "integration", "--",
           "bench_parity", "stan_parity"]
    print("rust gate: " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT).returncode == 0


def main(argv=None) -> int:
    args = parse_args(argv)
    os.makedirs(args.results, exist_ok=True)
    runs_path = os.path.join(args.results, "runs.jsonl")
    status_path = os.path.join(args.results, "status.json")
    if args.fresh:
        for path in (runs_path, status_path):
            if os.path.exists(path):
                os.remove(path)
        shutil.rmtree(os.path.join(WORK_DIR, "cache"), ignore_errors=True)

    import report  # matplotlib and arviz are only needed from here on

    if args.report_only:
        report.write(args.results)
        return 0

    started = time.time()
    loadavg_start = list(os.getloadavg())
    print(f"load average at start: {loadavg_start} on {os.cpu_count()} cores", flush=True)
    binary = None
    if "ours" in args.frameworks:
        binary = os.path.abspath(args.cluster_cli) if args.cluster_cli else build_cluster_cli()
    log_dir = os.path.join(WORK_DIR, "logs")
    os.makedirs(log_dir, exist_ok=True)

    done = {(r["framework"], r["model"], r["chains"], r["seed"]) for r in read_runs(runs_path)}
    failures = []
    for model in args.models:
        for framework in args.frameworks:
            jobs = [] if args.parity_only else [
                (c, s) for c in args.chains for s in args.seeds
                if (framework, model, c, s) not in done]
            if not jobs and not args.parity_only:
                continue
            status = run_worker(framework, model, jobs, args, binary, log_dir)
            status.pop("started", None)
            keep_first_compile(status, status_path, f"{framework}/{model}")
            update_json(status_path, f"{framework}/{model}", status)
            if status["exit_code"] != 0:
                reason = ("parity gate failed: " + str(status.get("parity", {}).get("message"))
                          if status["exit_code"] == PARITY_FAILED else
                          "error: " + (status.get("error") or "see log").strip().splitlines()[-1])
                failures.append(f"{framework}/{model}: {reason}")

    if not args.no_rust_gate and not rust_gate():
        failures.append("Rust test bench_parity/stan_parity failed")
    environment = {
        "machine": f"{platform.node()}: {os.cpu_count()} cores, {platform.platform()}",
        "python": platform.python_version(),
        "revision": git_revision(),
        "cluster_cli": rel(binary) if binary else None,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "seconds": time.time() - started,
        "loadavg_start": loadavg_start,
        "loadavg_end": list(os.getloadavg()),
    }
    update_json(os.path.join(args.results, "environment.json"), "last_run", environment)
    report.write(args.results)
    print(f"wrote {rel(os.path.join(args.results, 'cpu.md'))} and "
          f"{rel(os.path.join(args.results, 'cpu.png'))} ({environment['seconds']:.0f} s)")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
