"""Turns the JSON lines of ``cluster-cli bench --device gpu --json`` (ours) and of
``bench/gpu/numpyro_gpu.py`` (NumPyro) into the markdown of BENCHMARKS.md's GPU section:
one row per (model, chains) with both frameworks' min-ESS/s and their ratio, useful gradient
evaluations per second, lockstep efficiency, wall time and our check; then the round trip and
the issue's targets.

Usage: ``python bench/gpu/report.py ours.jsonl [numpyro.jsonl ...]``. Several files of one
framework are merged; a later row of the same (framework, model, chains) replaces an earlier
one, so a re-run of a few rows can be appended.
"""
from __future__ import annotations

import json
import math
import sys

# The targets.
ESS_RATIO_TARGET = 30.0
ESS_RATIO_TARGET_CHAINS = 8192
ESS_RATIO_TARGET_MODELS = ("eight_schools_noncentered", "logistic")
ROUND_TRIP_TARGET_MS = 0.15


def read_rows(paths):
    rows, round_trips, problems = {}, [], []
    for path in paths:
        try:
            with open(path) as f:
                lines = f.readlines()
        except OSError as err:
            problems.append(f"{path}: {err.strerror}")
            continue
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                problems.append(f"{path}:{number}: not JSON (a run cut short?)")
                continue
            if row.get("kind") == "round_trip":
                round_trips.append(row)
            elif row.get("kind") == "row":
                rows[(row.get("framework"), row.get("model"), row.get("chains"))] = row
    return rows, round_trips, problems


def number(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def fmt(value, digits=3):
    value = number(value)
    if value is None:
        return "–"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-2):
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.0f}"


def ratio(a, b):
    a, b = number(a), number(b)
    if a is None or b is None or b <= 0:
        return None
    return a / b


def status(row):
    if row is None:
        return "not run"
    if row.get("skipped"):
        return "skipped (time)"
    if row.get("error"):
        return "failed"
    return None


def check_text(row):
    if row is None or status(row):
        return status(row) or ""
    if "check_ok" not in row:
        return "not run"
    z = fmt(row.get("check_max_z"), 2)
    return f"ok (z {z})" if row["check_ok"] else f"**FAIL** (z {z})"


def describe(rows, framework):
    for (fw, _, _), row in rows.items():
        if fw == framework and not status(row):
            return row
    return None


def main(paths) -> int:
    rows, round_trips, problems = read_rows(paths)
    ours_any = describe(rows, "ours")
    numpyro_any = describe(rows, "numpyro")
    out = []
    if ours_any:
        out.append(
            f"Ours: `cluster-cli bench --device gpu`, {ours_any.get('kernel')} kernel, "
            f"{ours_any.get('precision')}, {ours_any.get('warmup')} warmup + {ours_any.get('draws')} draws, "
            f"on {ours_any.get('adapter')} ({ours_any.get('device_kind')}, driver {ours_any.get('driver')}); "
            + ("wall time of the second of two identical rounds (as NumPyro's); "
               if "first_round_s" in ours_any else "")
            + f"ESS: {ours_any.get('ess_method')}.")
    if numpyro_any:
        out.append(
            f"NumPyro {numpyro_any.get('numpyro_version')} (JAX {numpyro_any.get('jax_version')}, "
            f"{numpyro_any.get('jax_backend')}: {numpyro_any.get('adapter')}), chain_method=\"vectorized\", "
            f"{numpyro_any.get('precision')}, {numpyro_any.get('warmup')} warmup + {numpyro_any.get('draws')} draws, "
            "compile excluded (the second of two identical rounds, less the compile time JAX "
            "reports in it; rows whose NumPyro wall is marked ‡: one round run in pieces across "
            "processes, less the compile time JAX reports, bench/gpu/resumable.py); "
            f"ESS: {numpyro_any.get('ess_method')}.")
    out.append("Rates per second of warmup + sampling; ratio = ours / NumPyro; lockstep efficiency = "
               "useful leapfrog steps / executed lane-steps.\n")
    out.append("| model | chains | min bulk-ESS/s ours | NumPyro | ratio | min tail-ESS/s ours | NumPyro "
               "| ratio | useful grads/s ours | NumPyro | lockstep ours | NumPyro | wall s ours | NumPyro "
               "| divergences ours / NumPyro | check |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    keys = sorted({(model, chains) for (_, model, chains) in rows},
                  key=lambda k: (str(k[0]), k[1] if isinstance(k[1], int) else 0))
    targets = []
    for model, chains in keys:
        ours = rows.get(("ours", model, chains))
        theirs = rows.get(("numpyro", model, chains))
        o = ours if ours and not status(ours) else {}
        t = theirs if theirs and not status(theirs) else {}
        bulk_ratio = ratio(o.get("min_ess_bulk_per_s"), t.get("min_ess_bulk_per_s"))
        tail_ratio = ratio(o.get("min_ess_tail_per_s"), t.get("min_ess_tail_per_s"))

        def cell(row, source, key, digits=3):
            return fmt(row.get(key), digits) if row else (status(source) or "")

        out.append(" | ".join([
            f"| {model}", str(chains),
            cell(o, ours, "min_ess_bulk_per_s"), cell(t, theirs, "min_ess_bulk_per_s"),
            f"{fmt(bulk_ratio, 3)}x" if bulk_ratio else "–",
            cell(o, ours, "min_ess_tail_per_s"), cell(t, theirs, "min_ess_tail_per_s"),
            f"{fmt(tail_ratio, 3)}x" if tail_ratio else "–",
            cell(o, ours, "grads_per_s"), cell(t, theirs, "grads_per_s"),
            cell(o, ours, "lockstep_efficiency", 2), cell(t, theirs, "lockstep_efficiency", 2),
            cell(o, ours, "wall_s"),
            cell(t, theirs, "wall_s") + ("‡" if t.get("protocol") == "pieces" else ""),
            f"{o.get('divergences', '–')} / {t.get('divergences', '–')}",
            check_text(ours),
        ]) + " |")
        if chains == ESS_RATIO_TARGET_CHAINS and model in ESS_RATIO_TARGET_MODELS:
            targets.append((model, bulk_ratio))
    out.append("")
    for row in round_trips:
        median = number(row.get("median_ms"))
        met = "met" if median is not None and median <= ROUND_TRIP_TARGET_MS else "**not met**"
        out.append(
            f"Round trip of one dispatch ({row.get('framework')}, 1 chain of eight_schools_noncentered, "
            f"fused kernel, {row.get('steps')} steps, {row.get('precision')}): median {fmt(median)} ms "
            f"(10%: {fmt(row.get('p10_ms'))}, 90%: {fmt(row.get('p90_ms'))}; device time "
            f"{fmt(row.get('device_median_ms'))} ms) over {row.get('repetitions')}; "
            f"target ≤ {ROUND_TRIP_TARGET_MS} ms: {met}.")
    for model, value in targets:
        met = "met" if value is not None and value >= ESS_RATIO_TARGET else "**not met**"
        out.append(f"Target ≥ {ESS_RATIO_TARGET:.0f}x NumPyro's min bulk-ESS/s at "
                   f"{ESS_RATIO_TARGET_CHAINS} chains on {model}: {fmt(value)}x, {met}.")
    for problem in problems:
        out.append(f"note: {problem}")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
