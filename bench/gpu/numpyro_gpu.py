"""NumPyro's vectorised chains on one device: the anchor that ``cluster-cli bench --device gpu``
is compared with (``shared/GPU.md``).

Same models as ``bench/numpyro_models.py`` (imported from there), on the data of our IR files
``models/<model>.json`` (the numbers our sampler reads; ``shared/data`` is not carried to the
device machine), ``chain_method="vectorized"``, NUTS with NumPyro's defaults (target 0.8,
depth 10, diagonal mass matrix), f32 unless ``--x64``.

Per model and chain count, the same columns as ours, one JSON object per line on stdout
(progress and a readable table on stderr):

* ``wall_s``: warmup + sampling, measured on the second of two identical rounds (the first
  compiles; ``compile_s`` is the difference), after ``block_until_ready``;
* ``useful_grads``: the sum over chains and over warmup and sampling iterations of
  ``num_steps`` (the leapfrog steps each chain's trajectory needed); ``grads_per_s`` over
  ``wall_s``;
* ``min_ess_bulk``/``min_ess_tail``: the minimum over constrained scalar parameters of the
  rank-normalised bulk and tail ESS (Vehtari et al. 2021) as ArviZ 0.23's
  ``ess(method="bulk"|"tail")`` computes them, the estimators of our ``sampler::diagnostics``,
  by ``bench/gpu/ess.py`` (a NumPy-only port, checked against ArviZ by
  ``bench/gpu/test_ess.py``; the device machine has no ArviZ), named in ``ess_method``;
  ``diagnostics_s`` is the time it took;
* ``lockstep_efficiency``: sum of ``num_steps`` over the steps executed in lockstep, i.e.
  ``chains * max over chains of num_steps``, summed over iterations;
* ``divergences``: after warmup, summed over chains.

Run from the repository root: ``python bench/gpu/numpyro_gpu.py --chains 1,64 > numpyro.jsonl``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

GPU_DIR = os.path.dirname(os.path.abspath(__file__))
BENCH_DIR = os.path.dirname(GPU_DIR)
ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
sys.path.insert(0, GPU_DIR)

from ess import ESS_METHOD, ess_bulk_tail  # noqa: E402  (bench/gpu/ess.py)

DEFAULT_MODELS = ["eight_schools_noncentered", "logistic", "sv"]
DEFAULT_CHAINS = [1, 64, 1024, 8192, 65536]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ir_data(model: str) -> dict[str, np.ndarray]:
    """The data of ``models/<model>.json``, as ``numpyro_models`` expects it."""
    with open(os.path.join(ROOT, "models", model + ".json")) as f:
        ir = json.load(f)
    out = {}
    for name, value in ir.get("data", {}).items():
        (kind, numbers), = value.items()
        dtype = np.int64 if kind.startswith("int") else float
        out[name] = np.asarray(numbers, dtype=dtype)
    return out


def min_ess(samples: dict) -> tuple[float, float]:
    """(min bulk ESS, min tail ESS) over every constrained scalar of ``samples``, each site
    shaped (chains, draws, *shape); NaN if any scalar's ESS is NaN (e.g. NaN draws)."""
    bulks, tails = [], []
    for value in samples.values():
        value = np.asarray(value)
        chains, draws = value.shape[:2]
        bulk, tail = ess_bulk_tail(value.reshape(chains, draws, -1))
        bulks.append(bulk)
        tails.append(tail)
    return float(np.min(np.concatenate(bulks))), float(np.min(np.concatenate(tails)))


def lockstep(num_steps: np.ndarray) -> tuple[int, int]:
    """(useful, executed) lane-steps of (chains, iterations) step counts run in lockstep."""
    num_steps = np.asarray(num_steps, dtype=np.int64)
    chains = num_steps.shape[0]
    return int(num_steps.sum()), int(chains * num_steps.max(axis=0).sum())


def one_round(mcmc, key, kwargs, exclude):
    """Warmup then sampling; returns (seconds, warmup num_steps, samples, extra fields)."""
    import jax

    started = time.perf_counter()
    mcmc.warmup(key, extra_fields=("num_steps",) + exclude, collect_warmup=True, **kwargs)
    warm_steps = mcmc.get_extra_fields(group_by_chain=True)["num_steps"]
    jax.block_until_ready(warm_steps)
    mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=("num_steps", "diverging"), **kwargs)
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    jax.block_until_ready((samples, extra))
    return time.perf_counter() - started, warm_steps, samples, extra


def measure(model: str, n_chains: int, args) -> dict:
    import jax
    import numpyro
    from numpyro.infer import MCMC, NUTS

    import numpyro_models

    model_fn = numpyro_models._MODELS[model]
    kwargs = {k: jax.numpy.asarray(v) for k, v in ir_data(model).items()}
    mcmc = MCMC(NUTS(model_fn), num_warmup=args.warmup, num_samples=args.draws,
                num_chains=n_chains, chain_method="vectorized", progress_bar=False)
    # The warmup's samples are not needed, only its step counts: "~z.<site>" leaves a site out.
    from common import params
    exclude = tuple(f"~z.{p.name}" for p in params(model))
    key = jax.random.PRNGKey(args.seed)
    first_key, timed_key = jax.random.split(key)
    try:
        first, *_ = one_round(mcmc, first_key, kwargs, exclude)
    except Exception as err:  # an older NumPyro without "~" exclusions
        log(f"  ({err!r}: collecting warmup samples too)")
        exclude = ()
        first, *_ = one_round(mcmc, first_key, kwargs, exclude)
    # Progress on stderr, so that a row cut short by a time limit still says how far it got.
    log(f"  ({model}, {n_chains} chains: first round, compile included, {first:.1f} s)")
    wall, warm_steps, samples, extra = one_round(mcmc, timed_key, kwargs, exclude)
    log(f"  ({model}, {n_chains} chains: timed round {wall:.1f} s; ESS next)")

    diagnostics_started = time.perf_counter()
    bulk, tail = min_ess(samples)
    diagnostics_s = time.perf_counter() - diagnostics_started
    useful_warm, executed_warm = lockstep(warm_steps)
    useful_draws, executed_draws = lockstep(extra["num_steps"])
    useful = useful_warm + useful_draws
    executed = executed_warm + executed_draws
    device = jax.devices()[0]
    return {
        "kind": "row",
        "framework": "numpyro",
        "model": model,
        "chains": n_chains,
        "warmup": args.warmup,
        "draws": args.draws,
        "precision": "f64" if args.x64 else "f32",
        "seed": args.seed,
        "wall_s": wall,
        "compile_s": max(first - wall, 0.0),
        "first_round_s": first,
        "useful_grads": useful,
        "grads_per_s": useful / wall,
        "min_ess_bulk": bulk,
        "min_ess_tail": tail,
        "min_ess_bulk_per_s": bulk / wall,
        "min_ess_tail_per_s": tail / wall,
        "ess_method": ESS_METHOD,
        "lockstep_efficiency": useful / executed if executed else None,
        "divergences": int(np.asarray(extra["diverging"]).sum()),
        "diagnostics_s": diagnostics_s,
        "adapter": getattr(device, "device_kind", str(device)),
        "jax_backend": jax.default_backend(),
        "numpyro_version": numpyro.__version__,
        "jax_version": jax.__version__,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--chains", default=",".join(map(str, DEFAULT_CHAINS)))
    parser.add_argument("--warmup", type=int, default=400)
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--x64", action="store_true", help="float64 (default: float32)")
    parser.add_argument("--platform", choices=["cpu", "gpu"], help="JAX platform (default: JAX's)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="start no new row after this many seconds")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    chain_counts = [int(c) for c in args.chains.split(",") if c]

    import numpyro
    if args.platform:
        numpyro.set_platform(args.platform)
    if args.x64:
        numpyro.enable_x64()
    import jax

    log(f"NumPyro {numpyro.__version__}, JAX {jax.__version__} on {jax.devices()[0]}; "
        f"ESS: {ESS_METHOD}")
    started = time.perf_counter()
    for model in models:
        log(f"\n{model}\n| chains | wall s | compile s | useful grad evals/s | min bulk-ESS/s "
            "| min tail-ESS/s | lockstep eff. | divergences |\n|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n_chains in chain_counts:
            if args.time_limit is not None and time.perf_counter() - started > args.time_limit:
                log(f"| {n_chains} | skipped: past --time-limit |")
                row = {"kind": "row", "framework": "numpyro", "model": model,
                       "chains": n_chains, "skipped": True}
            else:
                try:
                    row = measure(model, n_chains, args)
                except Exception as err:  # one failed row (e.g. out of memory) is data too
                    log(f"| {n_chains} | failed: {err!r} |")
                    row = {"kind": "row", "framework": "numpyro", "model": model,
                           "chains": n_chains, "error": repr(err)[:500]}
                else:
                    log(f"| {n_chains} | {row['wall_s']:.2f} | {row['compile_s']:.1f} "
                        f"| {row['grads_per_s']:.3e} | {row['min_ess_bulk_per_s']:.4g} "
                        f"| {row['min_ess_tail_per_s']:.4g} | {row['lockstep_efficiency']:.2f} "
                        f"| {row['divergences']} |")
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
