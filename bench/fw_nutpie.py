"""nutpie (nuts-rs) on the PyMC models of ``pymc_models.py``, compiled with numba.

Why not nutpie's Stan backend: it compiles Stan programs through BridgeStan, and the
``bridgestan`` wheel ships no C++ sources: ``bridgestan.compile_model`` downloads the BridgeStan
source release from GitHub on first use, which is unreachable here (only package registries
are); httpstan's wheel carries Stan's headers and stanc but not the Stan Math make files that
BridgeStan's Makefile includes. nutpie's PyMC path (pytensor -> numba, a native function that
nuts-rs calls directly) needs nothing outside PyPI and is nutpie's default backend.

Compile time: ``nutpie.compile_pymc_model`` (pytensor graph + numba compilation).
Timing: nutpie reports no per-phase clock, so the wall time of ``nutpie.sample`` (after a
short warm-up run) is split between warmup and sampling in proportion to gradient evaluations
(see ``metrics.sampling_seconds``).
"""
from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from common import NUM_DRAWS, NUM_WARMUP, dim, params
from frameworks import LogDensityValues, SampleRun


class Adapter:
    name = "nutpie"
    parity_source = "nutpie's compiled (numba) logp+gradient function, called through ctypes"

    def __init__(self, **_):
        import nutpie

        import pymc_models

        self.nutpie = nutpie
        self.pymc_models = pymc_models
        self.model = None

    def versions(self):
        import numba
        import pymc
        import pytensor

        return {"nutpie": self.nutpie.__version__, "pymc": pymc.__version__,
                "pytensor": pytensor.__version__, "numba": numba.__version__}

    def prepare(self, model):
        self.model = model
        start = time.perf_counter()
        pm_model = self.pymc_models.build(model)
        self.compiled = self.nutpie.compile_pymc_model(pm_model, backend="numba")
        elapsed = time.perf_counter() - start
        # nutpie's unconstrained vector is PyMC's value variables, concatenated in this order.
        names = self.pymc_models.value_var_names(pm_model)
        expected = [p.name + "_log__" if p.positive else p.name for p in params(model)]
        if names != expected or self.compiled.n_dim != dim(model):
            raise ValueError(f"{model}: nutpie's unconstrained variables {names} "
                             f"({self.compiled.n_dim} values) != ours {expected}")
        return elapsed

    def log_density(self, points):
        """Calls the very function nuts-rs calls: ``(dim, x, grad_out, logp_out, user_data)``."""
        fn = self.compiled.compiled_logp_func.ctypes
        n = points.shape[1]
        lps, grads = [], []
        for x in points:
            x = np.ascontiguousarray(x, dtype=np.float64)
            grad = np.zeros(n)
            logp = np.zeros(1)
            as_ptr = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))  # noqa: E731
            code = fn(n, as_ptr(x), as_ptr(grad), as_ptr(logp),
                      ctypes.c_void_p(self.compiled.user_data.ctypes.data))
            if code != 0:
                raise RuntimeError(f"nutpie logp function returned error code {code} at {x}")
            lps.append(float(logp[0]))
            grads.append(grad)
        return LogDensityValues(np.array(lps), np.array(grads))

    def _sample(self, chains, seed, tune, draws):
        return self.nutpie.sample(self.compiled, draws=draws, tune=tune, chains=chains, seed=seed,
                                  cores=min(chains, os.cpu_count() or 1), progress_bar=False,
                                  save_warmup=True)

    def warm_up(self, chains):
        start = time.perf_counter()
        self._sample(chains, 12345, 200, 200)
        return time.perf_counter() - start

    def sample(self, chains, seed):
        start = time.perf_counter()
        trace = self._sample(chains, seed, NUM_WARMUP, NUM_DRAWS)
        wall = time.perf_counter() - start
        draws = {p.name: np.asarray(trace.posterior[p.name].values) for p in params(self.model)}
        stats, warm = trace.sample_stats, trace.warmup_sample_stats
        return SampleRun(
            draws=draws,
            n_grad=np.asarray(stats["n_steps"].values, dtype=float),
            n_grad_warmup=np.asarray(warm["n_steps"].values, dtype=float),
            divergent=np.asarray(stats["diverging"].values, dtype=bool),
            wall_seconds=wall,
            native_sampling_seconds=None,
        )
