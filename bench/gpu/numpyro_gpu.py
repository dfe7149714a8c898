"""NumPyro's vectorised chains on one device: the anchor that ``cluster-cli bench --device gpu``
is compared with (``bench/gpu/README.md``).

Same models as ``bench/numpyro_models.py`` (imported from there), on the data of our IR files
``models/<model>.json`` (the numbers our sampler reads, so the device machine needs nothing
outside the repository), ``chain_method="vectorized"``, NUTS with NumPyro's defaults (target 0.8,
depth 10, diagonal mass matrix), f32 unless ``--x64``.

Per model and chain count, the same columns as ours, one JSON object per line on stdout
(progress and a readable table on stderr):

* ``wall_s``: warmup + sampling, measured on the second of two identical rounds, after
  ``block_until_ready``, less the time JAX spent compiling in it (``timed_round_compile_s``:
  the union of the spans of JAX's ``/jax/core/compile/*`` monitoring events; about zero, since
  ``bench/numpyro_jit.py`` keeps NumPyro from compiling its sampling loops again at every call,
  which it otherwise does); ``compile_s`` is the compile time of the first round;
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
A row too long for one process (one device command): ``--resume-dir DIR`` runs the timed round
in pieces that resume across processes, compile excluded by JAX's own compile events
(``bench/gpu/resumable.py``).
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


COMPILE_EVENT_PREFIX = "/jax/core/compile/"


class CompileClock:
    """Seconds JAX spends compiling (the union of its compile events' spans) since ``reset``."""

    def __init__(self):
        import jax.monitoring

        self.spans: list[tuple[float, float]] = []
        jax.monitoring.register_event_time_span_listener(self._record)

    def _record(self, event, start, end, **_):
        if event.startswith(COMPILE_EVENT_PREFIX):
            self.spans.append((start, end))

    def reset(self) -> None:
        self.spans.clear()

    def seconds(self) -> float:
        total, reach = 0.0, float("-inf")
        for start, end in sorted(self.spans):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total


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


def build_mcmc(model: str, n_chains: int, num_warmup: int, num_samples: int):
    """``(mcmc, kwargs, exclude)``: NumPyro's vectorised NUTS on ``model``'s data, and the
    ``extra_fields`` entries that leave every sample site out of a collection."""
    import jax
    from numpyro.infer import MCMC, NUTS

    import numpyro_models
    from common import params

    model_fn = numpyro_models._MODELS[model]
    kwargs = {k: jax.numpy.asarray(v) for k, v in ir_data(model).items()}
    mcmc = MCMC(NUTS(model_fn), num_warmup=num_warmup, num_samples=num_samples,
                num_chains=n_chains, chain_method="vectorized", progress_bar=False)
    # The warmup's samples are not needed, only its step counts: "~z.<site>" leaves a site out.
    exclude = tuple(f"~z.{p.name}" for p in params(model))
    return mcmc, kwargs, exclude


def make_row(model: str, n_chains: int, args, *, wall: float, compile_s: float,
             warm_steps, sample_steps, diverging, samples, **fields) -> dict:
    """The JSON row of one measurement: ``samples`` maps each site to (chains, draws, ...),
    ``warm_steps``/``sample_steps`` are (chains, iterations) ``num_steps``; ``fields`` are
    added as they are."""
    import jax
    import numpyro

    diagnostics_started = time.perf_counter()
    bulk, tail = min_ess(samples)
    diagnostics_s = time.perf_counter() - diagnostics_started
    useful_warm, executed_warm = lockstep(warm_steps)
    useful_draws, executed_draws = lockstep(sample_steps)
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
        "compile_s": compile_s,
        **fields,
        "useful_grads": useful,
        "grads_per_s": useful / wall,
        "min_ess_bulk": bulk,
        "min_ess_tail": tail,
        "min_ess_bulk_per_s": bulk / wall,
        "min_ess_tail_per_s": tail / wall,
        "ess_method": ESS_METHOD,
        "lockstep_efficiency": useful / executed if executed else None,
        "divergences": int(np.asarray(diverging).sum()),
        "diagnostics_s": diagnostics_s,
        "adapter": getattr(device, "device_kind", str(device)),
        "jax_backend": jax.default_backend(),
        "numpyro_version": numpyro.__version__,
        "jax_version": jax.__version__,
    }


def use_compile_cache(directory: str) -> None:
    """Keeps every compiled program in JAX's persistent cache at ``directory``."""
    import jax

    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


def round_keys(seed: int):
    """(first round's key, timed round's key) of ``--seed``."""
    import jax

    return jax.random.split(jax.random.PRNGKey(seed))


def measure(model: str, n_chains: int, args, clock: "CompileClock") -> dict:
    mcmc, kwargs, exclude = build_mcmc(model, n_chains, args.warmup, args.draws)
    first_key, timed_key = round_keys(args.seed)
    clock.reset()
    first, *_ = one_round(mcmc, first_key, kwargs, exclude)
    compile_s = clock.seconds()
    # Progress on stderr, so that a row cut short by a time limit still says how far it got.
    log(f"  ({model}, {n_chains} chains: first round {first:.1f} s, compile {compile_s:.1f} s)")
    clock.reset()
    timed, warm_steps, samples, extra = one_round(mcmc, timed_key, kwargs, exclude)
    recompile_s = clock.seconds()
    log(f"  ({model}, {n_chains} chains: timed round {timed:.1f} s, compile {recompile_s:.2f} s "
        "(excluded); ESS next)")
    return make_row(model, n_chains, args, wall=timed - recompile_s, compile_s=compile_s,
                    warm_steps=warm_steps, sample_steps=extra["num_steps"],
                    diverging=extra["diverging"], samples=samples, first_round_s=first,
                    timed_round_s=timed, timed_round_compile_s=recompile_s)


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
                        help="start no new row (with --resume-dir: piece) after this many seconds")
    parser.add_argument("--compile-cache", help="JAX's persistent compilation cache directory "
                        "(saves time on a machine that ran the same programs; compile time is "
                        "excluded either way)")
    parser.add_argument("--resume-dir", help="one model and chain count, measured in pieces that "
                        "resume from this directory across processes (bench/gpu/resumable.py)")
    parser.add_argument("--piece", type=int, default=50,
                        help="iterations per piece with --resume-dir (divides --warmup, --draws)")
    parser.add_argument("--pieces-per-process", type=int, default=None,
                        help="with --resume-dir: stop after this many pieces")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    chain_counts = [int(c) for c in args.chains.split(",") if c]
    if args.resume_dir and (len(models) != 1 or len(chain_counts) != 1):
        parser.error("--resume-dir measures one model at one chain count")

    import numpyro
    if args.platform:
        numpyro.set_platform(args.platform)
    if args.x64:
        numpyro.enable_x64()
    import jax

    from numpyro_jit import memoize_maybe_jit

    memoize_maybe_jit()
    if args.compile_cache:
        use_compile_cache(args.compile_cache)
    log(f"NumPyro {numpyro.__version__}, JAX {jax.__version__} on {jax.devices()[0]}; "
        f"ESS: {ESS_METHOD}")
    if args.resume_dir:
        import resumable

        row = resumable.run(models[0], chain_counts[0], args)
        if row is not None:
            print(json.dumps(row), flush=True)
        return 0
    clock = CompileClock()
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
                    row = measure(model, n_chains, args, clock)
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
