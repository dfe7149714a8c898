"""Turns the JSON lines of ``cluster-cli bench --device gpu --json`` (ours), of
``bench/gpu/numpyro_gpu.py`` (NumPyro) and of ``bench/gpu/blackjax_gpu.py`` (BlackJAX) into
the markdown of BENCHMARKS.md's GPU section: one row per (model, chains) with ours' and
NumPyro's min-ESS/s and their ratio, useful gradient evaluations per second, lockstep
efficiency, wall time and our check; where there are BlackJAX rows, a second table with a
column per BlackJAX sampler and the ratio of ours to the best of them; then the round trip
and the issue's targets.

Usage: ``python bench/gpu/report.py ours.jsonl [numpyro.jsonl blackjax.jsonl ...]``. Several
files of one framework are merged; a later row of the same (framework, sampler, model, chains)
replaces an earlier one, so a re-run of a few rows can be appended.
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
BLACKJAX_SAMPLERS = ("nuts", "chees", "chees_unit", "meads", "laps")


def framework_key(row):
    """The framework of a row; a BlackJAX row is ``blackjax:<sampler>``."""
    framework = row.get("framework")
    return f"{framework}:{row.get('sampler')}" if framework == "blackjax" else framework


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
                rows[(framework_key(row), row.get("model"), row.get("chains"))] = row
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
    if row.get("not_applicable"):
        return "n/a"
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
        if fw.split(":")[0] == framework and not status(row):
            return row
    return None


def blackjax_samplers(rows):
    """BlackJAX's samplers in the rows, the known ones first."""
    found = {fw.split(":", 1)[1] for (fw, _, _) in rows if fw and fw.startswith("blackjax:")}
    return [s for s in BLACKJAX_SAMPLERS if s in found] + sorted(found - set(BLACKJAX_SAMPLERS))


def blackjax_table(rows, keys, key, title):
    """Markdown lines: ``key`` (a per-second column) of ours, NumPyro and each BlackJAX
    sampler, and ours / the best BlackJAX sampler."""
    samplers = blackjax_samplers(rows)
    out = [f"\n{title}\n",
           "| model | chains | ours | NumPyro | " + " | ".join(f"BlackJAX {s}" for s in samplers)
           + " | best BlackJAX | ours / best BlackJAX |",
           "|---|---:|---:|---:|" + "---:|" * len(samplers) + "---|---:|"]
    for model, chains in keys:
        ours = rows.get(("ours", model, chains))
        numpyro = rows.get(("numpyro", model, chains))
        cells, best, best_name = [], None, None
        for sampler in samplers:
            row = rows.get((f"blackjax:{sampler}", model, chains))
            value = number(row.get(key)) if row and not status(row) else None
            cells.append(fmt(value) if value is not None else (status(row) or ""))
            if value is not None and (best is None or value > best):
                best, best_name = value, sampler
        if not any(rows.get((f"blackjax:{s}", model, chains)) for s in samplers):
            continue

        def cell(row):
            return fmt(row.get(key)) if row and not status(row) else (status(row) or "")

        best_ratio = ratio(ours.get(key) if ours and not status(ours) else None, best)
        out.append(" | ".join([f"| {model}", str(chains), cell(ours), cell(numpyro), *cells,
                               f"{best_name} {fmt(best)}" if best_name else "–",
                               f"{fmt(best_ratio, 3)}x" if best_ratio else "–"]) + " |")
    return out


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
    blackjax_any = describe(rows, "blackjax")
    if blackjax_any:
        out.append(
            f"BlackJAX {blackjax_any.get('blackjax_version')} (JAX {blackjax_any.get('jax_version')}, "
            f"{blackjax_any.get('jax_backend')}: {blackjax_any.get('adapter')}), samplers of "
            "bench/gpu/blackjax_gpu.py on NumPyro's log density, "
            f"{blackjax_any.get('precision')}, {blackjax_any.get('warmup')} warmup + "
            f"{blackjax_any.get('draws')} draws, compile excluded as NumPyro's; "
            f"ESS: {blackjax_any.get('ess_method')}.")
    out.append("Rates per second of warmup + sampling; ratio = ours / NumPyro; lockstep efficiency = "
               "useful leapfrog steps / executed lane-steps.\n")
    keys = sorted({(model, chains) for (_, model, chains) in rows},
                  key=lambda k: (str(k[0]), k[1] if isinstance(k[1], int) else 0))
    main_keys = [k for k in keys if any(rows.get((fw, *k)) for fw in ("ours", "numpyro"))]
    if main_keys:
        out.append("| model | chains | min bulk-ESS/s ours | NumPyro | ratio | min tail-ESS/s ours "
                   "| NumPyro | ratio | useful grads/s ours | NumPyro | lockstep ours | NumPyro "
                   "| wall s ours | NumPyro | divergences ours / NumPyro | check |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    targets = []
    for model, chains in main_keys:
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
    if blackjax_any:
        out += blackjax_table(rows, keys, "min_ess_bulk_per_s", "Min bulk-ESS/s, BlackJAX's samplers beside ours and NumPyro's:")
        out += blackjax_table(rows, keys, "min_ess_tail_per_s", "Min tail-ESS/s:")
        out += blackjax_table(rows, keys, "grads_per_s", "Useful gradient evaluations/s:")
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
        if value is None:
            met = "not measured (no NumPyro row)"
        else:
            met = "met" if value >= ESS_RATIO_TARGET else "**not met**"
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
