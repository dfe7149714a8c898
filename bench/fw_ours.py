"""Our sampler, run as ``cluster-cli sample`` (the binary a user runs), read back from Stan CSV.

Timing: each chain's CSV ends with CmdStan's ``Elapsed Time`` block; its ``(Sampling)`` line is
our sampling time (the clock starts after warmup). ``cluster-cli`` compiles nothing ahead, so
its "compile time" is its time to first draw: the wall time of
``cluster-cli sample MODEL --chains 1 --warmup 0 --draws 1`` (process start, reading, checking
and lowering the model, one draw, writing the CSV), median of 3.

The parity gate of our own log density is the Rust test ``stan_parity`` (our evaluator against
Stan's fixture values) and ``bench_parity`` (against every other framework's saved values):
there is no Python binding of our evaluator to call here.
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np

from common import NUM_DRAWS, NUM_WARMUP, ROOT, params
from frameworks import SampleRun, parallel_seconds

ELAPSED_RE = re.compile(r"#\s+(?:Elapsed Time:\s+)?([0-9.eE+-]+) seconds \((Warm-up|Sampling)\)")


def read_stan_csv(path: str) -> tuple[list[str], np.ndarray, dict[str, float]]:
    """Header, numeric rows and the ``Elapsed Time`` seconds of one Stan CSV file."""
    header, rows, elapsed = None, [], {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                m = ELAPSED_RE.match(line.strip())
                if m:
                    elapsed[m.group(2)] = float(m.group(1))
                continue
            if header is None:
                header = line.strip().split(",")
            elif line.strip():
                rows.append([float(v) for v in line.split(",")])
    return header, np.array(rows), elapsed


class Adapter:
    name = "ours"
    parity_source = ""

    def __init__(self, cluster_cli: str, **_):
        self.binary = cluster_cli
        self.model = None
        self.workdir = tempfile.mkdtemp(prefix="bench-ours-")

    def versions(self):
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True)
        return {"cluster-cli": out.stdout.strip() or "unknown"}

    def _model_path(self):
        return os.path.join(ROOT, "models", self.model + ".json")

    def _run(self, chains, seed, warmup, draws, out_csv):
        cmd = [self.binary, "sample", self._model_path(), "--chains", str(chains),
               "--seed", str(seed), "--warmup", str(warmup), "--draws", str(draws),
               "--output", out_csv, "--quiet", "--save-warmup"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return wall

    def prepare(self, model):
        self.model = model
        out = os.path.join(self.workdir, "first_draw.csv")
        self.first_draw_seconds = statistics.median(self._run(1, s, 0, 1, out) for s in (1, 2, 3))
        return self.first_draw_seconds

    def log_density(self, points):
        return None

    def warm_up(self, chains):
        return 0.0

    def sample(self, chains, seed):
        out_dir = os.path.join(self.workdir, f"c{chains}-s{seed}")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        command_wall = self._run(chains, seed, NUM_WARMUP, NUM_DRAWS,
                                 os.path.join(out_dir, "draws.csv"))
        files = ([os.path.join(out_dir, "draws.csv")] if chains == 1 else
                 [os.path.join(out_dir, f"draws_{c + 1}.csv") for c in range(chains)])
        per_chain, sampling, warmup_seconds = [], [], []
        for path in files:
            header, rows, elapsed = read_stan_csv(path)
            if rows.shape[0] != NUM_WARMUP + NUM_DRAWS:
                raise RuntimeError(f"{path}: {rows.shape[0]} rows, expected {NUM_WARMUP + NUM_DRAWS}")
            per_chain.append((header, rows))
            sampling.append(elapsed["Sampling"])
            warmup_seconds.append(elapsed["Warm-up"])
        header = per_chain[0][0]
        stack = np.stack([rows for _, rows in per_chain])  # (chains, warmup + draws, columns)
        col = {name: i for i, name in enumerate(header)}
        draws = {}
        for p in params(self.model):
            idx = [col[c] for c in p.columns()]
            values = stack[:, NUM_WARMUP:, idx]
            draws[p.name] = values[:, :, 0] if p.size is None else values
        shutil.rmtree(out_dir, ignore_errors=True)
        # The others' wall time excludes compilation; ours excludes its equivalent, the time
        # to first draw (never below the longest chain's own warmup + sampling time).
        longest_chain = max(w + s for w, s in zip(warmup_seconds, sampling))
        wall = max(command_wall - self.first_draw_seconds, longest_chain)
        return SampleRun(
            draws=draws,
            n_grad=stack[:, NUM_WARMUP:, col["n_leapfrog__"]],
            n_grad_warmup=stack[:, :NUM_WARMUP, col["n_leapfrog__"]],
            divergent=stack[:, NUM_WARMUP:, col["divergent__"]] > 0,
            wall_seconds=wall,
            native_sampling_seconds=parallel_seconds(sampling),
            extra={"chain_sampling_seconds": sampling, "chain_warmup_seconds": warmup_seconds,
                   "command_wall_seconds": command_wall},
        )
