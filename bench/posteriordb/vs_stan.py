#!/usr/bin/env python3
"""Ours against Stan on posteriordb's reference posteriors: min bulk-ESS/s with one chain, and
the time from a .stan file to sampling (Stan's compilation against our lowering).

For each posterior (`stan/tests/posteriordb/`) and seed, interleaved so that the machine's
load falls on both alike:
- ours: `cluster-cli posteriordb --exact --filter P --chains 1 --seed S --draws-dir D`, which
  writes the chain as Stan CSV and its timings as JSON;
- Stan: PyStan 3 (`stan.build`, then `sample(num_chains=1)`), same warmup and draws, the
  reference's adapt_delta and max_treedepth; times from Stan's own `Elapsed Time` lines.
The first build of each program goes to a fresh httpstan cache (`--cache`), so it compiles:
that is Stan's compile time. Later builds (other seeds, other data) come from the cache.

ESS: ArviZ `ess(method="bulk")` of every parameter column (the `parameters` block; names as
in ours' Stan CSV), min over columns, the same code for both sides (`ess_worker.py`, run by a
Python that has ArviZ). ESS/s = min bulk-ESS / (warmup + sampling seconds of the chain);
compile and lowering times are excluded and reported apart. Each run records the load average.

Usage (PyStan lives in its own venv; ArviZ in another):
    /tmp/parity-venv/bin/python bench/posteriordb/vs_stan.py [--seeds 1 2 3] [--filter NAME]
        [--arviz-python /tmp/bayes-cluster-arviz/bin/python] [--compile-only] [--table-only]
Results: `bench/results/posteriordb/vs-stan/` (`runs.jsonl`, `compile.jsonl`, `table.md`).
Re-running skips what `runs.jsonl` and `compile.jsonl` already hold.
"""

import argparse
import json
import math
import os
import pathlib
import re
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
DB = ROOT / "stan" / "tests" / "posteriordb"
OUT = ROOT / "bench" / "results" / "posteriordb" / "vs-stan"
WARMUP, DRAWS = 1000, 1000
SECONDS_RE = re.compile(r"([0-9.eE+-]+) seconds \((Warm-up|Sampling)\)")


# Programs first in this order (one compile of `nes` serves 8 posteriors, `blr` 2; then a spread
# of kinds), the rest after; Stan's builds are slow on a busy 2-core machine.
PRIORITY = ["arK", "nes", "blr", "eight_schools_noncentered", "kidscore_momiq",
            "logearn_interaction", "garch11", "arma11", "hmm_example", "low_dim_gauss_mix",
            "logmesquite_logvas", "kilpisjarvi", "hmm_drive_0", "earn_height"]
# Slow to sample (Stan: about 1 ESS/s on 2 cores): after all the others.
LAST = ["diamonds"]
# Programs ours does not lower yet (ODEs): compiled last, if ever.
NOT_OURS = ["lotka_volterra", "one_comp_mm_elim_abs"]


def priority(ref):
    model = ref["model"]
    if model in PRIORITY:
        return PRIORITY.index(model)
    return len(PRIORITY) + (1 if model in LAST else 2 if model in NOT_OURS else 0)


def cpu_seconds():
    """CPU seconds of this process and its waited-for children (the compiler)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load():
    return [round(x, 2) for x in os.getloadavg()]


def references(filters):
    refs = []
    for path in sorted((DB / "reference").glob("*.json")):
        ref = json.loads(path.read_text())
        if not filters or any(f in ref["posterior"] for f in filters):
            refs.append(ref)
    return refs


def read_jsonl(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_jsonl(path, record):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


class Ess:
    """A long-lived ArviZ process: one npz of (chains, draws) columns in, min bulk ESS out."""

    def __init__(self, python):
        self.proc = subprocess.Popen(
            [python, str(pathlib.Path(__file__).with_name("ess_worker.py"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __call__(self, columns: dict):
        path = OUT / "tmp-draws.npz"
        np.savez(path, **columns)
        self.proc.stdin.write(str(path) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())


def read_stan_csv(path):
    """(header, rows) of a Stan CSV file, comments skipped."""
    lines = [ln for ln in pathlib.Path(path).read_text().splitlines() if ln and ln[0] != "#"]
    header = lines[0].split(",")
    rows = np.array([[float(v) for v in ln.split(",")] for ln in lines[1:]])
    return header, rows


def run_ours(args, ref, seed, ess):
    draws_dir = OUT / "draws" / f"seed{seed}"
    cmd = [str(args.cli), "posteriordb", "--dir", str(DB), "--exact", "--filter", ref["posterior"],
           "--chains", "1", "--warmup", str(WARMUP), "--draws", str(DRAWS), "--seed", str(seed),
           "--threads", "1", "--draws-dir", str(draws_dir)]
    before = load()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (usage_after.ru_utime - usage.ru_utime) + (usage_after.ru_stime - usage.ru_stime)
    record = json.loads((draws_dir / f"{ref['posterior']}.json").read_text())
    out = {"side": "ours", "posterior": ref["posterior"], "seed": seed, "load_before": before,
           "load_after": load(), "exit": proc.returncode, "process_wall_seconds": wall,
           "process_cpu_seconds": cpu}
    if "unsupported" in record:
        return {**out, "unsupported": record["unsupported"]}
    header, rows = read_stan_csv(draws_dir / record["csv"][0])
    cols = record["parameter_columns"]
    index = {name: i for i, name in enumerate(header)}
    est = ess({c: rows[None, :, index[c]] for c in cols})
    chain = record["chain_stats"][0]
    seconds = chain["warmup_seconds"] + chain["sampling_seconds"]
    os.remove(draws_dir / record["csv"][0])  # the draws are large; the JSON stays
    return {**out, "columns": cols, "min_ess_bulk": est["min_ess_bulk"], "worst": est["worst"],
            "warmup_seconds": chain["warmup_seconds"],
            "sampling_seconds": chain["sampling_seconds"], "seconds": seconds,
            "ess_per_second": est["min_ess_bulk"] / seconds,
            "grads": chain["grad_evals_warmup"] + chain["grad_evals_sampling"],
            "divergent": chain["divergent"], "load_seconds": record["load_seconds"],
            "to_first_draw_seconds": record["to_first_draw_seconds"],
            "ess_rust": record["min_ess_bulk"]}


def elapsed_seconds(stan_output: bytes):
    out = {}
    for line in stan_output.splitlines():
        if b'"logger"' not in line or b"seconds (" not in line:
            continue
        m = SECONDS_RE.search(json.loads(line)["values"][0])
        if m:
            out[m.group(2)] = float(m.group(1))
    return out


def program(ref):
    return (DB / "models" / f"{ref['model']}.stan").read_text()


def data(ref):
    return json.loads((DB / "data" / f"{ref['data']}.json").read_text())


def cold_build(code, name):
    """What httpstan's `POST /models` does for a program not in its cache (stanc, then the C++
    build), called directly: through `stan.build` the HTTP client gives up after 300 s, which
    a build on a busy machine can take."""
    import asyncio

    import httpstan.cache
    import httpstan.compile
    import httpstan.models

    httpstan.cache.delete_model_directory(name)
    _, warnings = httpstan.compile.compile(code, f"model_{name.split('/')[1]}")
    httpstan.cache.dump_stanc_warnings(warnings, name)
    output = asyncio.run(httpstan.models.build_services_extension_module(code))
    httpstan.cache.dump_services_extension_module_compiler_output(output, name)


def compile_stan(stan, ref, compiled):
    """Builds the program once into the fresh cache and records how long that took."""
    import httpstan.models

    if ref["model"] in compiled:
        return
    code = program(ref)
    name = httpstan.models.calculate_model_name(code)
    cached = (pathlib.Path(os.environ["XDG_CACHE_HOME"]) / "httpstan").glob(f"*/{name}")
    record = {"model": ref["model"], "httpstan_name": name, "load_before": load()}
    if any(True for _ in cached):
        record["cached"] = True  # not a cold build: no compile time
    start, cpu = time.perf_counter(), cpu_seconds()
    try:
        if not record.get("cached"):
            cold_build(code, name)
        stan.build(code, data=data(ref), random_seed=1)  # from the cache: loads the data
        record["seconds"] = time.perf_counter() - start
        record["cpu_seconds"] = cpu_seconds() - cpu
    except Exception as err:  # noqa: BLE001  (a program Stan refuses is recorded, not fatal)
        record["error"] = str(err).splitlines()[0] if str(err) else repr(err)
    record["load_after"] = load()
    compiled[ref["model"]] = record
    append_jsonl(OUT / "compile.jsonl", record)
    print(f"compile {ref['model']}: {record.get('seconds', record.get('error'))}", flush=True)


def run_stan(stan, ref, seed, columns, ess):
    posterior = stan.build(program(ref), data=data(ref), random_seed=seed)
    control = ref["control"]
    before = load()
    start = time.perf_counter()
    fit = posterior.sample(num_chains=1, num_warmup=WARMUP, num_samples=DRAWS, save_warmup=True,
                           delta=control["adapt_delta"], max_depth=control["max_treedepth"])
    wall = time.perf_counter() - start
    names = list(fit.sample_and_sampler_param_names) + list(fit.constrained_param_names)
    index = {n: i for i, n in enumerate(names)}
    if fit._draws.shape[1] != WARMUP + DRAWS:
        raise RuntimeError(f"Stan returned {fit._draws.shape[1]} iterations")
    warmup_leapfrog = fit._draws[index["n_leapfrog__"], :WARMUP, 0]
    table = fit._draws[:, WARMUP:, :]  # (columns, draws, chains)
    missing = [c for c in columns if c not in index]
    if missing:
        raise RuntimeError(f"Stan lacks columns {missing}")
    est = ess({c: table[index[c], :, :].T for c in columns})
    times = elapsed_seconds(fit.stan_outputs[0])
    seconds = times["Warm-up"] + times["Sampling"]
    n_leapfrog = table[index["n_leapfrog__"], :, 0]
    return {"side": "stan", "posterior": ref["posterior"], "seed": seed, "load_before": before,
            "load_after": load(), "min_ess_bulk": est["min_ess_bulk"], "worst": est["worst"],
            "warmup_seconds": times["Warm-up"], "sampling_seconds": times["Sampling"],
            "seconds": seconds, "ess_per_second": est["min_ess_bulk"] / seconds,
            "wall_seconds": wall, "grads_sampling": float(n_leapfrog.sum()),
            "grads_warmup": float(warmup_leapfrog.sum()),
            "divergent": int(table[index["divergent__"], :, 0].sum())}


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def fmt(x):
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def table(refs, seeds):
    runs = read_jsonl(OUT / "runs.jsonl")
    compiled = {c["model"]: c for c in read_jsonl(OUT / "compile.jsonl")}
    lines = [
        f"1 chain x ({WARMUP} warmup + {DRAWS} draws), the reference's adapt_delta and "
        f"max_treedepth; ESS/s = min bulk-ESS (ArviZ, parameter columns) / (warmup + sampling "
        f"s); median over seeds {', '.join(map(str, seeds))} (ratio: median of per-seed "
        f"ratios). Load: 1-min load average, min-max over the runs.",
        "",
        "| posterior | seeds | ours ESS/s | Stan ESS/s | ours/Stan | min-max ratio "
        "| ours grads/s | Stan grads/s | ours to first draw | Stan compile (CPU) | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ratios, compile_ratios, notes = [], [], []
    for ref in refs:
        p = ref["posterior"]
        ours = {r["seed"]: r for r in runs if r["posterior"] == p and r["side"] == "ours"}
        stan = {r["seed"]: r for r in runs if r["posterior"] == p and r["side"] == "stan"}
        if any("unsupported" in r for r in ours.values()):
            notes.append(f"{p}: ours does not lower it ({next(iter(ours.values()))['unsupported']})")
            continue
        both = [s for s in seeds if s in ours and s in stan and "error" not in stan[s]]
        if not both:
            continue
        per_seed = [ours[s]["ess_per_second"] / stan[s]["ess_per_second"] for s in both]
        ratio = statistics.median(per_seed)
        ratios.append(ratio)
        o = statistics.median(ours[s]["ess_per_second"] for s in both)
        t = statistics.median(stan[s]["ess_per_second"] for s in both)
        og = statistics.median(ours[s]["grads"] / ours[s]["seconds"] for s in both)
        tg = statistics.median((stan[s]["grads_sampling"] + stan[s].get("grads_warmup", 0))
                               / stan[s]["seconds"] for s in both) if all(
            "grads_warmup" in stan[s] for s in both) else float("nan")
        first = statistics.median(ours[s]["to_first_draw_seconds"] for s in both)
        comp = compiled.get(ref["model"], {})
        if comp.get("cpu_seconds"):
            compile_ratios.append(comp["cpu_seconds"] / first)
            comp_text = f"{comp['seconds']:.0f} s ({comp['cpu_seconds']:.0f} s)"
        elif comp.get("seconds") or comp.get("seconds_over"):
            comp_text = (f"{comp['seconds']:.0f} s (-)" if comp.get("seconds")
                         else f"> {comp['seconds_over']:.0f} s (-)")
        else:
            comp_text = "-"
        loads = [x for s in both for r in (ours[s], stan[s]) for x in (r["load_before"][0],
                                                                        r["load_after"][0])]
        lines.append(
            f"| {p} | {len(both)} | {fmt(o)} | {fmt(t)} | **{ratio:.2f}x** | {min(per_seed):.2f}-"
            f"{max(per_seed):.2f} | {fmt(og)} | {fmt(tg)} | {1e3 * first:.1f} ms | "
            f"{comp_text} | {min(loads):.1f}-{max(loads):.1f} |")
    n_met = sum(r >= 2 for r in ratios)
    lines += [
        "",
        f"Posteriors both run: {len(ratios)}; ours >= 2x Stan on {n_met}, >= 1x on "
        f"{sum(r >= 1 for r in ratios)}; geometric mean of the ratios {geomean(ratios):.2f}x "
        f"(min {min(ratios, default=float('nan')):.2f}x, max "
        f"{max(ratios, default=float('nan')):.2f}x).",
    ]
    if compile_ratios:
        lines.append(f"Stan's compile CPU time / ours' time to first draw (wall): geometric mean "
                     f"{geomean(compile_ratios):.0f}x over {len(compile_ratios)} posteriors.")
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--filter", action="append", default=[])
    ap.add_argument("--cli", type=pathlib.Path, default=ROOT / "target/release/cluster-cli")
    ap.add_argument("--cache", type=pathlib.Path, default=pathlib.Path("/tmp/vs-stan-httpstan"),
                    help="XDG cache directory for httpstan; fresh, so first builds compile")
    ap.add_argument("--arviz-python", default="/tmp/bayes-cluster-arviz/bin/python")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--shard", default="0/1",
                    help="K/N: with --compile-only, compile every N-th program from the K-th")
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--recompile", nargs="+", default=[], metavar="MODEL",
                    help="time a cold build of these programs again (scratch cache)")
    ap.add_argument("--compile", action="store_true",
                    help="compile Stan programs as needed (else skip the posteriors whose "
                         "program a --compile-only run has not compiled yet)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    refs = references(args.filter)
    refs.sort(key=priority)
    if args.table_only:
        print(table(refs, args.seeds))
        return
    os.environ["XDG_CACHE_HOME"] = str(args.cache)
    import stan  # after XDG_CACHE_HOME: httpstan reads it for its model cache

    compiled = {c["model"]: c for c in read_jsonl(OUT / "compile.jsonl")}
    if args.recompile:
        # Programs whose first build lacks a CPU time: build again, cold, in a scratch cache.
        import tempfile

        main_cache = os.environ["XDG_CACHE_HOME"]
        for model in args.recompile:
            ref = next(r for r in refs if r["model"] == model)
            os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="vs-stan-recompile-")
            compiled.pop(model, None)
            compile_stan(stan, ref, compiled)
            os.environ["XDG_CACHE_HOME"] = main_cache
        return
    if args.compile_only:
        k, n = map(int, args.shard.split("/"))
        models = list(dict.fromkeys(r["model"] for r in refs))[k::n]
        for ref in refs:
            if ref["model"] in models:
                compiled.update({c["model"]: c for c in read_jsonl(OUT / "compile.jsonl")})
                compile_stan(stan, ref, compiled)
        return
    ess = Ess(args.arviz_python)
    done = {(r["side"], r["posterior"], r["seed"]) for r in read_jsonl(OUT / "runs.jsonl")}
    for ref in refs:
        p = ref["posterior"]
        compiled.update({c["model"]: c for c in read_jsonl(OUT / "compile.jsonl")})
        if ref["model"] not in compiled and ref["model"] not in NOT_OURS and not args.compile:
            print(f"{p}: Stan's program is not compiled yet, skipped", flush=True)
            continue
        for seed in args.seeds:
            if ("ours", p, seed) in done:
                ours = next(r for r in read_jsonl(OUT / "runs.jsonl")
                            if (r["side"], r["posterior"], r["seed"]) == ("ours", p, seed))
            else:
                ours = run_ours(args, ref, seed, ess)
                append_jsonl(OUT / "runs.jsonl", ours)
            if "unsupported" in ours:
                print(f"{p}: ours unsupported", flush=True)
                break
            if ("stan", p, seed) not in done:
                if ref["model"] not in compiled and not args.compile:
                    print(f"{p}: Stan's program is not compiled yet, skipped", flush=True)
                    break
                compile_stan(stan, ref, compiled)
                try:
                    rec = run_stan(stan, ref, seed, ours["columns"], ess)
                except Exception as err:  # noqa: BLE001
                    rec = {"side": "stan", "posterior": p, "seed": seed, "error": repr(err)}
                append_jsonl(OUT / "runs.jsonl", rec)
                print(f"{p} seed {seed}: ours {ours['ess_per_second']:.1f} ESS/s, stan "
                      f"{rec.get('ess_per_second', float('nan')):.1f} ESS/s, load {load()}",
                      flush=True)
    text = table(refs, args.seeds)
    (OUT / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
