"""One framework x one model in its own process: compile, parity gate, then the timed jobs.

Started by ``run.py`` (never two at a time). Writes:
- ``--status FILE``: JSON with the versions, compile time, parity-gate result and warm-up
  times (written after each step, so a crash leaves what was done);
- one JSON line per finished job appended to ``--runs FILE`` (``metrics.summarize``).
Exit status 3 if the parity gate fails (then nothing is timed), 1 on any other error.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frameworks  # noqa: E402
import metrics  # noqa: E402
import parity  # noqa: E402

PARITY_FAILED = 3


def parse_jobs(text: str) -> list[tuple[int, int]]:
    """``"1:1,1:2,4:1"`` -> [(chains, seed), ...]."""
    if not text:
        return []
    return [tuple(int(v) for v in job.split(":")) for job in text.split(",")]


def write_json(path: str, value: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--framework", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--jobs", default="", help="chains:seed pairs, comma separated")
    ap.add_argument("--status", required=True)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--cluster-cli", default=None)
    a = ap.parse_args()

    status = {"framework": a.framework, "model": a.model, "started": time.time()}
    try:
        fw = frameworks.load(a.framework, cluster_cli=a.cluster_cli)
        status["versions"] = fw.versions()
        status["compile_seconds"] = fw.prepare(a.model)
        write_json(a.status, status)

        gate = parity.check(fw, a.model)
        status["parity"] = parity.as_record(gate)
        write_json(a.status, status)
        if not gate.passed:
            print(f"PARITY FAILED: {a.framework} {a.model}: {gate.message}", file=sys.stderr)
            return PARITY_FAILED

        warm_up = {}
        for chains, seed in parse_jobs(a.jobs):
            if chains not in warm_up:
                warm_up[chains] = fw.warm_up(chains)
                status["warm_up_seconds"] = warm_up
                write_json(a.status, status)
            load_before = os.getloadavg()[0]
            run = fw.sample(chains, seed)
            record = metrics.summarize(a.model, a.framework, chains, seed, run)
            record["load_before"] = load_before
            record["warm_up_seconds"] = warm_up[chains]
            record["compile_seconds"] = status["compile_seconds"]
            record["time"] = time.time()
            with open(a.runs, "a") as f:
                f.write(json.dumps(record) + "\n")
            print(f"{a.framework:8s} {a.model:26s} chains={chains} seed={seed}: "
                  f"min bulk-ESS {record['min_bulk_ess']:.0f} in {record['sampling_seconds']:.4g} s "
                  f"= {record['bulk_ess_per_second']:.4g}/s, {record['grad_evals_per_draw']:.1f} "
                  f"grads/draw, {record['divergences']} divergent", flush=True)
        return 0
    except Exception:  # noqa: BLE001  (reported to the runner through the status file)
        status["error"] = traceback.format_exc()
        write_json(a.status, status)
        traceback.print_exc()
        return 1
    finally:
        status["finished"] = time.time()
        write_json(a.status, status)


if __name__ == "__main__":
    sys.exit(main())
