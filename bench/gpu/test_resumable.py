"""Check bench/gpu/resumable.py: a round run in pieces across processes is the round that
``numpyro_gpu.py`` times in one piece (needs JAX and NumPyro, e.g. .venv-bench; runs on the CPU):

    .venv-bench/bin/python bench/gpu/test_resumable.py

eight_schools_noncentered, 8 chains, 40 warmup + 40 draws: once as ``MCMC.warmup`` +
``MCMC.run`` in this process, once as pieces of 10 iterations, 3 pieces per process, each process
resuming from the directory the last one left. The draws, step counts and divergences must be
equal, and the row's ESS and step totals must be those of the one-piece round.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

GPU_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(GPU_DIR))
sys.path.insert(0, GPU_DIR)

MODEL, CHAINS, WARMUP, DRAWS, SEED, PIECE = "eight_schools_noncentered", 8, 40, 40, 3, 10


def reference():
    import numpyro

    numpyro.set_platform("cpu")
    from numpyro_gpu import build_mcmc, lockstep, min_ess, one_round, round_keys

    mcmc, kwargs, exclude = build_mcmc(MODEL, CHAINS, WARMUP, DRAWS)
    _, timed_key = round_keys(SEED)
    _, warm_steps, samples, extra = one_round(mcmc, timed_key, kwargs, exclude)
    samples = {k: np.asarray(v) for k, v in samples.items()}
    return {
        "warm_steps": np.asarray(warm_steps),
        "num_steps": np.asarray(extra["num_steps"]),
        "diverging": np.asarray(extra["diverging"]),
        "samples": samples,
        "min_ess": min_ess(samples),
        "useful": lockstep(warm_steps)[0] + lockstep(extra["num_steps"])[0],
    }


def in_pieces(directory):
    command = [sys.executable, os.path.join(GPU_DIR, "numpyro_gpu.py"), "--platform", "cpu",
               "--models", MODEL, "--chains", str(CHAINS), "--warmup", str(WARMUP),
               "--draws", str(DRAWS), "--seed", str(SEED), "--resume-dir", directory,
               "--piece", str(PIECE), "--pieces-per-process", "3"]
    for _ in range(6):
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        if lines:
            return json.loads(lines[-1])
    raise AssertionError("no row after 6 processes")


def main() -> int:
    expected = reference()
    failures = []
    with tempfile.TemporaryDirectory() as directory:
        row = in_pieces(directory)
        from resumable import stacked

        warm = range(WARMUP // PIECE)
        draws = range(WARMUP // PIECE, (WARMUP + DRAWS) // PIECE)
        got = {"warm_steps": stacked(directory, warm, "num_steps"),
               "num_steps": stacked(directory, draws, "num_steps"),
               "diverging": stacked(directory, draws, "diverging")}
        for name, value in got.items():
            if not np.array_equal(value, expected[name]):
                failures.append(f"{name} differs")
        for site, value in expected["samples"].items():
            piece_value = stacked(directory, draws, "z." + site)
            if not np.array_equal(piece_value, value):
                worst = np.max(np.abs(piece_value - value))
                failures.append(f"draws of {site} differ (largest difference {worst:.3g})")
    checks = {
        "processes": (row["processes"], 3),
        "pieces": (row["pieces"], (WARMUP + DRAWS) // PIECE),
        "useful_grads": (row["useful_grads"], expected["useful"]),
        "min_ess_bulk": (row["min_ess_bulk"], expected["min_ess"][0]),
        "min_ess_tail": (row["min_ess_tail"], expected["min_ess"][1]),
        "divergences": (row["divergences"], int(expected["diverging"].sum())),
    }
    for name, (value, want) in checks.items():
        if value != want:
            failures.append(f"row {name}: {value}, expected {want}")
    if not row["wall_s"] > 0 or row["compile_s"] < 0:
        failures.append(f"times: wall {row['wall_s']}, compile {row['compile_s']}")
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print(f"ok: {row['pieces']} pieces in {row['processes']} processes equal the one-piece "
              f"round (wall {row['wall_s']:.2f} s, compile {row['compile_s']:.2f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
