"""Check bench/gpu/blackjax_gpu.py against NumPyro's NUTS and ArviZ (needs BlackJAX 1.7.1,
NumPyro, ArviZ; a few minutes on a CPU, most of it compiling):

    python bench/gpu/test_blackjax.py [--models a,b] [--samplers nuts,chees,meads,laps]
                                      [--chains 16] [--warmup 100] [--draws 100]
                                      [--draws-dir DIR]

For each model and sampler, the constrained draws of one round of ``blackjax_gpu.py``
(``build_round``; or the ``<model>-<sampler>-<chains>.npz`` that ``blackjax_gpu.py
--save-draws DIR`` kept) are compared with a NumPyro NUTS reference (8 chains x 1000 draws
after 500 warmup, NumPyro's defaults): every scalar's posterior mean must agree within
``Z_LIMIT`` combined Monte Carlo standard errors (ArviZ's ``mcse(method="mean")`` of both
sides); and ``bench/gpu/ess.py``'s bulk and tail ESS of the same draws must equal ArviZ's
``ess(method="bulk"|"tail")`` within 1e-8 relative.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blackjax_gpu  # noqa: E402
import ess  # noqa: E402
import numpyro_gpu  # noqa: E402

Z_LIMIT = 4.0
ESS_TOLERANCE = 1e-8


def flat(samples):
    """(chains, draws, scalars) and the scalars' names, sites in order."""
    arrays, names = [], []
    for name, value in sorted(samples.items()):
        value = np.asarray(value, dtype=np.float64)
        chains, draws = value.shape[:2]
        value = value.reshape(chains, draws, -1)
        arrays.append(value)
        names += [name] if value.shape[2] == 1 and np.ndim(samples[name]) == 2 else [
            f"{name}[{k}]" for k in range(value.shape[2])]
    return np.concatenate(arrays, axis=2), names


def summary(x):
    """(means, MCSE of the means) per scalar of (chains, draws, scalars), by ArviZ."""
    import arviz as az

    mcse = az.mcse(az.convert_to_dataset(x), method="mean")["x"].values
    return x.mean(axis=(0, 1)), mcse


def reference(model):
    import jax

    mcmc, kwargs, _ = numpyro_gpu.build_mcmc(model, 8, 500, 1000)
    mcmc.run(jax.random.PRNGKey(20261128), **kwargs)
    return flat(mcmc.get_samples(group_by_chain=True))[0]


def draws_of(model, sampler, args):
    if args.draws_dir:
        path = os.path.join(args.draws_dir, f"{model}-{sampler}-{args.chains}.npz")
        with np.load(path) as f:
            return {name: f[name] for name in f.files}
    import jax

    one_round = blackjax_gpu.build_round(model, sampler, args.chains, args.warmup, args.draws)
    samples, *_ = one_round(jax.random.PRNGKey(args.seed))
    return {name: np.asarray(value) for name, value in samples.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="eight_schools_noncentered,logistic")
    parser.add_argument("--samplers", default=",".join(blackjax_gpu.SAMPLERS))
    parser.add_argument("--chains", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--draws-dir", help="read the draws that blackjax_gpu.py --save-draws kept")
    args = parser.parse_args(argv)

    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.getLogger("arviz").setLevel(logging.ERROR)
    import arviz as az

    failed = False
    for model in [m for m in args.models.split(",") if m]:
        started = time.perf_counter()
        ref = reference(model)
        ref_mean, ref_mcse = summary(ref)
        print(f"{model}: NumPyro NUTS reference 8 x 1000 in {time.perf_counter() - started:.0f} s")
        for sampler in [s for s in args.samplers.split(",") if s]:
            started = time.perf_counter()
            x, names = flat(draws_of(model, sampler, args))
            mean, mcse = summary(x)
            z = np.abs(mean - ref_mean) / np.sqrt(mcse ** 2 + ref_mcse ** 2)
            worst = int(np.argmax(z))
            bulk, tail = ess.ess_bulk_tail(x)
            dataset = az.convert_to_dataset(x)
            az_bulk = az.ess(dataset, method="bulk")["x"].values
            az_tail = az.ess(dataset, method="tail")["x"].values
            ess_diff = max(np.max(np.abs(bulk - az_bulk) / az_bulk),
                           np.max(np.abs(tail - az_tail) / az_tail))
            ok = z.max() <= Z_LIMIT and ess_diff <= ESS_TOLERANCE
            failed |= not ok
            print(f"  {sampler:6s} {x.shape[0]} x {x.shape[1]}: max z {z.max():.2f} "
                  f"({names[worst]}: {mean[worst]:.4g} vs {ref_mean[worst]:.4g}), "
                  f"min bulk ESS {bulk.min():.1f} (ArviZ {az_bulk.min():.1f}), "
                  f"min tail ESS {tail.min():.1f} (ArviZ {az_tail.min():.1f}), "
                  f"ESS rel diff {ess_diff:.1e}, {time.perf_counter() - started:.0f} s  "
                  f"{'ok' if ok else 'FAIL'}")
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
