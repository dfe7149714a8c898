"""Stan through PyStan 3 (httpstan bundles Stan and its compiler), on ``bench/stan/*.stan``.

Compile time: the first ``stan.build`` of a model (httpstan caches the compiled model; the
runner points its cache at ``bench/.work/cache`` so a first run really compiles). PyStan takes
the seed at build time, so each job rebuilds from the cache (a fraction of a second, untimed).
Timing: Stan's own ``Elapsed Time ... (Sampling)`` of each chain, read from the messages that
httpstan returns with the draws (``Fit.stan_outputs``); PyStan runs chains in a process pool
of one process per core.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time

import numpy as np

from common import NUM_DRAWS, NUM_WARMUP, ROOT, STAN_DIR, bench_data, params
from frameworks import LogDensityValues, SampleRun, parallel_seconds

sys.path.insert(0, os.path.join(ROOT, "scripts"))
from stan_parity_fixtures import stan_data  # noqa: E402  (one data builder for fixtures and bench)

SECONDS_RE = re.compile(r"([0-9.eE+-]+) seconds \((Warm-up|Sampling)\)")


def elapsed_seconds(stan_output: bytes) -> dict[str, float]:
    """Stan's ``Elapsed Time`` lines (warmup, sampling) from one chain's httpstan output."""
    out = {}
    for line in stan_output.splitlines():
        if b'"logger"' not in line or b"seconds (" not in line:
            continue
        text = json.loads(line)["values"][0]
        m = SECONDS_RE.search(text)
        if m:
            out[m.group(2)] = float(m.group(1))
    return out


class Adapter:
    name = "stan"
    parity_source = "PyStan Model.log_prob(adjust_transform=True) and grad_log_prob"

    def __init__(self, **_):
        import stan

        self.stan = stan
        self.model = None

    def versions(self):
        import httpstan

        from stan_parity_fixtures import stan_version

        return {"pystan": self.stan.__version__, "httpstan": httpstan.__version__,
                "stan": stan_version()}

    def _build(self, seed):
        with open(os.path.join(STAN_DIR, self.model + ".stan")) as f:
            code = f.read()
        return self.stan.build(code, data=stan_data(self.model, bench_data()), random_seed=seed)

    def prepare(self, model):
        self.model = model
        start = time.perf_counter()
        self.posterior = self._build(0)
        names = [p.name for p in params(model)]
        if list(self.posterior.param_names[:len(names)]) != names:
            raise ValueError(f"{model}: Stan parameters {self.posterior.param_names} != ours {names}")
        return time.perf_counter() - start

    def log_density(self, points):
        lps, grads = [], []
        for x in points:
            x = [float(v) for v in x]
            lps.append(self.posterior.log_prob(x, adjust_transform=True))
            grads.append(self.posterior.grad_log_prob(x))
        return LogDensityValues(np.array(lps), np.array(grads))

    def warm_up(self, chains):
        return 0.0

    def sample(self, chains, seed):
        posterior = self._build(seed)
        start = time.perf_counter()
        fit = posterior.sample(num_chains=chains, num_warmup=NUM_WARMUP, num_samples=NUM_DRAWS,
                               save_warmup=True)
        wall = time.perf_counter() - start
        # fit._draws: (sampler + constrained columns, warmup + draws, chains)
        table = np.transpose(fit._draws, (2, 1, 0))
        n_sampler = len(fit.sample_and_sampler_param_names)
        col = {name: i for i, name in enumerate(fit.sample_and_sampler_param_names)}
        col.update({name: n_sampler + i for i, name in enumerate(fit.constrained_param_names)})
        if table.shape[1] != NUM_WARMUP + NUM_DRAWS:
            raise RuntimeError(f"stan returned {table.shape[1]} draws per chain")
        draws = {}
        for p in params(self.model):
            idx = [col[c] for c in p.columns()]
            values = table[:, NUM_WARMUP:, idx]
            draws[p.name] = values[:, :, 0] if p.size is None else values
        elapsed = [elapsed_seconds(out) for out in fit.stan_outputs]
        return SampleRun(
            draws=draws,
            n_grad=table[:, NUM_WARMUP:, col["n_leapfrog__"]],
            n_grad_warmup=table[:, :NUM_WARMUP, col["n_leapfrog__"]],
            divergent=table[:, NUM_WARMUP:, col["divergent__"]] > 0,
            wall_seconds=wall,
            native_sampling_seconds=parallel_seconds([e["Sampling"] for e in elapsed]),
            extra={"chain_sampling_seconds": [e["Sampling"] for e in elapsed],
                   "chain_warmup_seconds": [e["Warm-up"] for e in elapsed]},
        )
