"""Turns ``bench/results/runs.jsonl`` (+ ``status.json``, ``environment.json``) into the
markdown tables ``cpu.md`` and the chart ``cpu.png``.

Every figure is a median over seeds. "Best peer" is the peer (Stan, nutpie, PyMC, NumPyro) with
the highest median min-bulk-ESS/s for that model and chain count (the ESS/s tables also give
the ratio to the better of Stan and nutpie, the anchors of issue 5); the ESS-per-gradient and
gradients-per-second tables compare us with that same peer, so that our ESS/s ratio is the
product of the two ratios (adaptation quality x gradient cost), which is what closing a gap
needs to know.
"""
from __future__ import annotations

import json
import os
import statistics
from collections import defaultdict

from common import FRAMEWORKS, MODELS, NUM_DRAWS, NUM_WARMUP, PEERS

LABEL = {"ours": "ours", "stan": "Stan", "nutpie": "nutpie", "pymc": "PyMC", "numpyro": "NumPyro"}
COLOR = {"ours": "#d62728", "stan": "#1f77b4", "nutpie": "#2ca02c", "pymc": "#9467bd",
         "numpyro": "#ff7f0e"}


def load(results_dir: str):
    runs = []
    path = os.path.join(results_dir, "runs.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            runs = [json.loads(line) for line in f if line.strip()]
    status, environment = {}, {}
    for name, target in (("status.json", status), ("environment.json", environment)):
        p = os.path.join(results_dir, name)
        if os.path.exists(p):
            with open(p) as f:
                target.update(json.load(f))
    return runs, status, environment


def fmt(x: float | None) -> str:
    """Three significant digits, thousands separated; '-' for missing."""
    if x is None:
        return "-"
    if x >= 100:
        return f"{round(x, -len(str(int(x))) + 3):,.0f}"
    if x >= 1:
        return f"{x:.3g}"
    return f"{x:.2g}"


class Table:
    """Median per (model, framework, chains) of any run field, with flags."""

    def __init__(self, runs):
        self.groups = defaultdict(list)
        for r in runs:
            self.groups[(r["model"], r["framework"], r["chains"])].append(r)

    def median(self, model, framework, chains, field):
        rs = self.groups.get((model, framework, chains))
        if not rs:
            return None
        return statistics.median(r[field] for r in rs)

    def flagged(self, model, framework, chains) -> bool:
        return any(r["flagged"] for r in self.groups.get((model, framework, chains), []))

    def best_peer(self, model, chains, peers=PEERS):
        scores = [(self.median(model, f, chains, "bulk_ess_per_second"), f) for f in peers]
        scores = [(s, f) for s, f in scores if s is not None]
        return max(scores)[1] if scores else None


def missing_reason(status, framework, model) -> str:
    s = status.get(f"{framework}/{model}")
    if not s:
        return "-"
    if s.get("exit_code") == 3:
        return "parity failed"
    if s.get("exit_code"):
        return "error"
    return "-"


def ess_table(t: Table, status, chains, field="bulk_ess_per_second") -> list[str]:
    head = ("| model | " + " | ".join(LABEL[f] for f in FRAMEWORKS)
            + " | best peer | ours / best peer | ours / best of Stan, nutpie |")
    lines = [head, "|---|" + "---:|" * len(FRAMEWORKS) + "---|---:|---:|"]
    for model in MODELS:
        cells = []
        for f in FRAMEWORKS:
            v = t.median(model, f, chains, field)
            cell = fmt(v) if v is not None else missing_reason(status, f, model)
            if v is not None and t.flagged(model, f, chains):
                cell += " †"
            cells.append(cell)
        best = t.best_peer(model, chains)
        ours = t.median(model, "ours", chains, field)
        theirs = t.median(model, best, chains, field) if best else None
        ratio = f"{ours / theirs:.2f}" if ours and theirs else "-"
        anchor = t.best_peer(model, chains, ("stan", "nutpie"))
        anchor_value = t.median(model, anchor, chains, field) if anchor else None
        anchor_ratio = (f"{ours / anchor_value:.2f} ({LABEL[anchor]})"
                        if ours and anchor_value else "-")
        lines.append(f"| {model} | " + " | ".join(cells)
                     + f" | {LABEL.get(best, '-')} | {ratio} | {anchor_ratio} |")
    return lines


def decomposition_table(t: Table, field: str, chains=1) -> list[str]:
    head = "| model | " + " | ".join(LABEL[f] for f in FRAMEWORKS) + " | ours / best peer |"
    lines = [head, "|---|" + "---:|" * len(FRAMEWORKS) + "---:|"]
    for model in MODELS:
        cells = [fmt(t.median(model, f, chains, field)) for f in FRAMEWORKS]
        best = t.best_peer(model, chains)
        ours = t.median(model, "ours", chains, field)
        theirs = t.median(model, best, chains, field) if best else None
        ratio = f"{ours / theirs:.2f} ({LABEL[best]})" if ours and theirs else "-"
        lines.append(f"| {model} | " + " | ".join(cells) + f" | {ratio} |")
    return lines


def detail_table(t: Table, status) -> list[str]:
    lines = ["| model | framework | min tail-ESS/s (1 chain) | grads/draw | divergences per seed "
             "(1 chain; 4 chains) | worst parameter | compile s |",
             "|---|---|---:|---:|---|---|---:|"]
    for model in MODELS:
        for f in FRAMEWORKS:
            one = sorted(t.groups.get((model, f, 1), []), key=lambda r: r["seed"])
            four = sorted(t.groups.get((model, f, 4), []), key=lambda r: r["seed"])
            if not one and not four:
                continue
            div = "/".join(str(r["divergences"]) for r in one) + "; " + \
                "/".join(str(r["divergences"]) for r in four)
            worst = sorted({r["worst_parameter"] for r in one})
            compile_s = compile_seconds(t, status, f, model)
            lines.append(
                f"| {model} | {LABEL[f]} | {fmt(t.median(model, f, 1, 'tail_ess_per_second'))} | "
                f"{fmt(t.median(model, f, 1, 'grad_evals_per_draw'))} | {div} | "
                f"{', '.join(worst)} | {fmt(compile_s)} |")
    return lines


def compile_seconds(t: Table, status, framework, model):
    """Seconds before the first draw that are not sampling: ours, the time to first draw;
    Stan, nutpie, PyMC, the compile step; NumPyro, its first run minus a timed run (JIT)."""
    s = status.get(f"{framework}/{model}", {})
    if "compile_seconds" not in s:
        return None
    seconds = s["compile_seconds"]
    if framework == "numpyro":
        warm = s.get("warm_up_seconds", {}).get("1")
        timed = t.median(model, framework, 1, "wall_seconds")
        if warm is not None and timed is not None:
            seconds += max(0.0, warm - timed)
    return seconds


def parity_table(status) -> list[str]:
    lines = ["| model | " + " | ".join(LABEL[f] for f in PEERS) + " |",
             "|---|" + "---|" * len(PEERS)]
    for model in MODELS:
        cells = []
        for f in PEERS:
            p = status.get(f"{f}/{model}", {}).get("parity")
            if not p:
                cells.append("-")
            elif not p["passed"]:
                cells.append("**FAILED** " + p["message"])
            else:
                g = p["max_grad_deviation"]
                cells.append(f"{p['max_lp_deviation']:.1e} / {g:.1e}" if g is not None
                             else f"{p['max_lp_deviation']:.1e}")
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return lines


def versions_line(status) -> str:
    seen = {}
    for s in status.values():
        seen.update(s.get("versions", {}))
    return ", ".join(v if v.startswith(k) else f"{k} {v}" for k, v in sorted(seen.items()))


def load_triple(values) -> str:
    return "/".join(f"{v:.2f}" for v in values) if values else "?"


def markdown(runs, status, environment) -> str:
    t = Table(runs)
    env = environment.get("last_run", {})
    loads = [r["load_before"] for r in runs if "load_before" in r]
    load_text = (f"1-minute load average before each job: median {statistics.median(loads):.2f}, "
                 f"range {min(loads):.2f}-{max(loads):.2f}" if loads else "")
    seeds = sorted({r["seed"] for r in runs})
    out = [
        "<!-- written by bench/run.py (bench/report.py); do not edit by hand -->",
        "```sh",
        "bench/setup.sh && .venv-bench/bin/python bench/run.py",
        "```",
        "",
        f"{env.get('machine', '')}; revision {env.get('revision', '?')}; finished "
        f"{env.get('finished', '?')} after {env.get('seconds', 0) / 60:.0f} min; load average "
        f"(1/5/15 min) {load_triple(env.get('loadavg_start'))} at the start, "
        f"{load_triple(env.get('loadavg_end'))} at the end. {load_text}.",
        f"Versions: {versions_line(status)}.",
        "",
        f"{NUM_WARMUP} warmup + {NUM_DRAWS} draws per chain, seeds {', '.join(map(str, seeds))}, "
        "one job at a time; figures are medians over seeds. ESS: ArviZ `ess(method=\"bulk\")` "
        "(and `\"tail\"`) on every framework's exported draws, minimum over all scalar "
        "parameters on the constrained scale. Seconds: sampling only, compilation and warmup "
        "excluded (see bench/README.md for each framework's clock). † = some seed had more "
        "than 1% divergent transitions (reported, not comparable).",
        "",
        "### Min bulk-ESS per second, 1 chain",
        "",
        *ess_table(t, status, 1),
        "",
        "### Min bulk-ESS per second, 4 chains (on all cores)",
        "",
        *ess_table(t, status, 4),
        "",
        "### Why: bulk-ESS per 1000 gradient evaluations (1 chain)",
        "",
        "Adaptation and trajectory quality; independent of machine load.",
        "",
        *decomposition_table(t, "bulk_ess_per_1000_grads"),
        "",
        "### Why: gradient evaluations per second of sampling (1 chain)",
        "",
        "Cost of one gradient plus the sampler's own overhead per step; depends on load.",
        "",
        *decomposition_table(t, "grad_evals_per_second"),
        "",
        "### Min tail-ESS per second, 1 chain",
        "",
        *ess_table(t, status, 1, "tail_ess_per_second"),
        "",
        "### Details",
        "",
        *detail_table(t, status),
        "",
        "### Parity gate: max |log density - ours - constant| / max relative gradient error",
        "",
        "At the 20 points of `sampler/tests/fixtures/stan_parity/<model>.json`; ours is checked "
        "by the Rust tests `stan_parity` and `bench_parity`.",
        "",
        *parity_table(status),
        "",
    ]
    return "\n".join(out)


def chart(runs, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    t = Table(runs)
    fig, axes = plt.subplots(2, 1, figsize=(12, 8.5), sharex=True)
    width = 0.8 / len(FRAMEWORKS)
    x = np.arange(len(MODELS))
    for ax, chains in zip(axes, (1, 4)):
        for k, f in enumerate(FRAMEWORKS):
            med, lo, hi = [], [], []
            for m in MODELS:
                rs = t.groups.get((m, f, chains), [])
                vals = [r["bulk_ess_per_second"] for r in rs]
                med.append(statistics.median(vals) if vals else np.nan)
                lo.append(min(vals) if vals else np.nan)
                hi.append(max(vals) if vals else np.nan)
            med, lo, hi = map(np.array, (med, lo, hi))
            pos = x - 0.4 + width * (k + 0.5)
            bars = ax.bar(pos, med, width, color=COLOR[f], label=LABEL[f])
            for bar, m in zip(bars, MODELS):
                if t.flagged(m, f, chains):  # > 1% divergent: hatched and pale
                    bar.set_hatch("///")
                    bar.set_alpha(0.45)
            ax.errorbar(pos, med, yerr=[med - lo, hi - med], fmt="none", ecolor="black",
                        elinewidth=0.7, capsize=1.5)
        ax.set_yscale("log")
        ax.set_ylabel("min bulk-ESS / s (log)")
        ax.set_title(f"{chains} chain{'s' if chains > 1 else ''}: median of seeds (bars: min-max)")
        ax.grid(axis="y", which="major", alpha=0.3)
    axes[1].set_xticks(x, [m.replace("_noncentered", "\nnoncentered") for m in MODELS])
    axes[0].legend(ncol=len(FRAMEWORKS), loc="upper right", fontsize=9)
    fig.suptitle(f"CPU samplers, {NUM_WARMUP} warmup + {NUM_DRAWS} draws per chain "
                 "(hatched: >1% divergent, not comparable)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(results_dir: str) -> None:
    runs, status, environment = load(results_dir)
    with open(os.path.join(results_dir, "cpu.md"), "w") as f:
        f.write(markdown(runs, status, environment))
    chart(runs, os.path.join(results_dir, "cpu.png"))
