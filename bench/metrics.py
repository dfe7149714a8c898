"""One estimator for every framework: ArviZ's rank-normalised bulk and tail ESS (Vehtari et al.
2021), minimum over all scalar parameters on the constrained scale, plus the run's counts.

Sampling time (``sampling_seconds``), "native" where the framework has its own clock of the
post-warmup phase:
- ours and Stan: CmdStan's ``Elapsed Time (Sampling)`` of each chain; PyMC: per-chain callback
  stamps (last warmup draw to last draw). With several chains, which run on a pool of one
  worker per core, the job's time is the sum over chains divided by the number of workers
  (``frameworks.parallel_seconds``);
- NumPyro: the wall time of ``MCMC.run`` after ``MCMC.warmup`` (all chains at once);
- nutpie has no such clock: "apportioned", the wall time of the whole job (compilation
  excluded) times the fraction of its gradient evaluations spent after warmup.
The apportioned time is recorded for every run, as a check on that rule.
"""
from __future__ import annotations

import os

import arviz as az
import numpy as np

from common import DIVERGENCE_FLAG_FRACTION, NUM_DRAWS, params
from frameworks import SampleRun


def min_ess(model: str, draws: dict[str, np.ndarray]) -> tuple[float, float, str]:
    """(min bulk-ESS, min tail-ESS, the scalar parameter with the smallest bulk-ESS)."""
    dataset = az.convert_to_dataset({p.name: draws[p.name] for p in params(model)})
    bulk, tail = az.ess(dataset, method="bulk"), az.ess(dataset, method="tail")
    worst_bulk, worst_name, worst_tail = np.inf, "", np.inf
    for p in params(model):
        b = np.atleast_1d(bulk[p.name].values)
        t = np.atleast_1d(tail[p.name].values)
        if np.nanmin(b) < worst_bulk:
            i = int(np.nanargmin(b))
            worst_bulk, worst_name = float(b[i]), p.name if p.size is None else f"{p.name}.{i + 1}"
        worst_tail = min(worst_tail, float(np.nanmin(t)))
    return worst_bulk, worst_tail, worst_name


def check_shapes(model: str, chains: int, run: SampleRun) -> None:
    for p in params(model):
        expected = (chains, NUM_DRAWS) + (() if p.size is None else (p.size,))
        shape = tuple(run.draws[p.name].shape)
        if shape != expected:
            raise RuntimeError(f"{model}: draws of {p.name} have shape {shape}, expected {expected}")
    if run.n_grad.shape != (chains, NUM_DRAWS) or run.divergent.shape != (chains, NUM_DRAWS):
        raise RuntimeError(f"{model}: statistics of shape {run.n_grad.shape}, {run.divergent.shape}")


def summarize(model: str, framework: str, chains: int, seed: int, run: SampleRun) -> dict:
    """The JSON record of one run (a line of ``bench/results/runs.jsonl``)."""
    check_shapes(model, chains, run)
    bulk, tail, worst = min_ess(model, run.draws)
    grads = float(run.n_grad.sum())
    grads_warmup = float(run.n_grad_warmup.sum())
    apportioned = run.wall_seconds * grads / (grads + grads_warmup)
    if run.native_sampling_seconds is not None:
        seconds, timing = float(run.native_sampling_seconds), "native"
    else:
        seconds, timing = apportioned, "apportioned"
    divergences = int(run.divergent.sum())
    n_draws = chains * NUM_DRAWS
    return {
        "model": model, "framework": framework, "chains": chains, "seed": seed,
        "min_bulk_ess": bulk, "min_tail_ess": tail, "worst_parameter": worst,
        "sampling_seconds": seconds, "timing": timing,
        "apportioned_seconds": apportioned, "wall_seconds": run.wall_seconds,
        "native_sampling_seconds": run.native_sampling_seconds,
        "bulk_ess_per_second": bulk / seconds, "tail_ess_per_second": tail / seconds,
        "grad_evals": grads, "grad_evals_warmup": grads_warmup,
        "grad_evals_per_draw": grads / n_draws,
        "grad_evals_per_second": grads / seconds,
        "bulk_ess_per_1000_grads": 1000.0 * bulk / grads,
        "divergences": divergences, "flagged": divergences > DIVERGENCE_FLAG_FRACTION * n_draws,
        "finite": bool(all(np.all(np.isfinite(v)) for v in run.draws.values())),
        "loadavg": list(os.getloadavg()),
        **{k: v for k, v in run.extra.items()},
    }
