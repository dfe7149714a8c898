"""PyMC's own NUTS (``pm.sample``, pytensor C backend) on the models of ``pymc_models.py``.

Compile time: the first ``pm.sample`` of the model (20 iterations), which compiles the log
density and its gradient (pytensor caches the C code on disk, so later calls only rebuild the
graph: they do that before the first draw, outside the timed window).
Timing: a ``pm.sample`` callback stamps every draw (in the main process, also for chains run
in worker processes); a chain's sampling time runs from its last warmup draw to its last draw.
The wall time (for the apportioned check) runs from the first to the last draw of any chain.
"""
from __future__ import annotations

import os
import time

import numpy as np

from common import NUM_DRAWS, NUM_WARMUP, params
from frameworks import LogDensityValues, SampleRun, parallel_seconds


class Adapter:
    name = "pymc"
    parity_source = "Model.compile_logp(jacobian=True) and compile_dlogp(jacobian=True)"

    def __init__(self, **_):
        import pymc

        import pymc_models

        self.pm = pymc
        self.pymc_models = pymc_models
        self.model = None

    def versions(self):
        import pytensor

        return {"pymc": self.pm.__version__, "pytensor": pytensor.__version__}

    def _sample(self, chains, seed, tune, draws, callback=None):
        return self.pm.sample(
            draws=draws, tune=tune, chains=chains, cores=min(chains, os.cpu_count() or 1),
            random_seed=seed, progressbar=False, discard_tuned_samples=False,
            compute_convergence_checks=False, callback=callback, model=self.pm_model)

    def prepare(self, model):
        self.model = model
        start = time.perf_counter()
        self.pm_model = self.pymc_models.build(model)
        self._sample(1, 12345, 10, 10)
        return time.perf_counter() - start

    def log_density(self, points):
        logp = self.pm_model.compile_logp(jacobian=True)
        dlogp = self.pm_model.compile_dlogp(jacobian=True)
        lps, grads = [], []
        for u in points:
            point = self.pymc_models.unconstrained_point(self.pm_model, self.model, u)
            lps.append(float(logp(point)))
            grads.append(np.asarray(dlogp(point), dtype=float))
        return LogDensityValues(np.array(lps), np.array(grads))

    def warm_up(self, chains):
        start = time.perf_counter()
        self._sample(chains, 12345, 50, 50)
        return time.perf_counter() - start

    def sample(self, chains, seed):
        stamps = []  # (time, chain, tuning)

        def callback(trace, draw):
            stamps.append((time.perf_counter(), draw.chain, draw.tuning))

        idata = self._sample(chains, seed, NUM_WARMUP, NUM_DRAWS, callback)
        times = np.array([t for t, _, _ in stamps])
        chain = np.array([c for _, c, _ in stamps])
        tuning = np.array([tun for _, _, tun in stamps])
        per_chain = [float(times[chain == c].max() - times[(chain == c) & tuning].max())
                     for c in np.unique(chain)]
        draws = {p.name: np.asarray(idata.posterior[p.name].values) for p in params(self.model)}
        stats, warm = idata.sample_stats, idata.warmup_sample_stats
        return SampleRun(
            draws=draws,
            n_grad=np.asarray(stats["n_steps"].values, dtype=float),
            n_grad_warmup=np.asarray(warm["n_steps"].values, dtype=float),
            divergent=np.asarray(stats["diverging"].values, dtype=bool),
            wall_seconds=float(times[-1] - times[0]),
            native_sampling_seconds=parallel_seconds(per_chain),
            extra={"chain_sampling_seconds": per_chain},
        )
