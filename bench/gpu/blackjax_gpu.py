"""BlackJAX's many-chain samplers on one device, beside NumPyro's vectorised NUTS
(``numpyro_gpu.py``) as anchors for ``cluster-cli bench --device gpu`` (``bench/gpu/README.md``).

Same models and data as ``numpyro_gpu.py``: the NumPyro models of ``bench/numpyro_models.py``
on the data of ``models/<model>.json``. BlackJAX samples the unconstrained position that
NumPyro's ``initialize_model`` defines (log density ``-potential_fn``, a dict of sites); each
chain starts where NumPyro's default ``init_to_uniform`` would (uniform(-2, 2) on every
unconstrained coordinate), and the draws go back to the constrained scale through NumPyro's
``postprocess_fn`` before their ESS. f32 unless ``--x64``; 400 warmup + 400 draws per chain.

Samplers (``--samplers``), BlackJAX 1.7.1, its defaults unless said here:

* ``nuts``: ``blackjax.window_adaptation(blackjax.nuts, ...)`` (Stan's windowed step size and
  diagonal mass matrix, target 0.8), one per chain (``jax.vmap`` over chains), then
  ``blackjax.nuts`` with each chain's adapted parameters;
* ``chees``: ``blackjax.chees_adaptation`` over all chains (target acceptance 0.651,
  ``mass_matrix_estimation="diagonal"``: a diagonal metric estimated from the ensemble, with
  its trajectory-length floor), Adam as TensorFlow Probability's ChEES uses it
  (``optax.adam(0.025, b1=0.0, b2=0.95)``), initial step size 0.1; then ``blackjax.dhmc`` (jittered
  trajectory lengths from the Halton sequence, shared by all chains) with the adapted
  parameters. BlackJAX 1.7.1 folds the ensemble into its diagonal-metric estimate one chain
  at a time (a sequential ``lax.scan`` over chains at each step of the last half of warmup),
  so the warmup's cost grows with the chain count however wide the device;
* ``chees_unit`` (not in the default list): the same with BlackJAX's default identity metric
  (``mass_matrix_estimation=None``), without that sequential fold;
* ``meads``: ``blackjax.meads_adaptation`` over all chains (4 folds; one fold is frozen at
  each warmup step), then ``blackjax.ghmc`` (one leapfrog step per iteration) with the
  fold-averaged parameters;
* ``laps``: adjusted MCLMC. LAPS proper is in 1.7.1 only as
  ``blackjax.adaptation.laps.laps``: it returns the ensemble's final state (one draw per
  chain), needs a device mesh and is not exported at the top level, so it does not fit this
  protocol of per-chain draws. Instead, as BlackJAX's tests and Sampling Book show:
  ``blackjax.adjusted_mclmc_find_L_and_step_size`` per chain (``jax.vmap``; the static
  ``adjusted_mclmc`` kernel with the McLachlan isokinetic integrator, target acceptance 0.9,
  diagonal preconditioning, ``num_steps`` chosen so that its 10% + 10% + 10% tuning passes
  take ``--warmup`` iterations; its default ``target_num_integration_steps`` 2), then
  ``blackjax.adjusted_mclmc_dynamic`` with random
  trajectory lengths (``make_random_trajectory_length_fn(True)``, mean ``L / step_size``).
  A chain whose tuning ends with a non-finite step size or ``L`` keeps its initial point
  (every draw divergent); ``laps_failed_tuning_chains`` counts them.

Per (model, sampler, chains), one JSON object per line on stdout, with numpyro_gpu.py's fields
plus ``framework: "blackjax"`` and ``sampler``:

* ``wall_s``: warmup + sampling (initial points included; one jitted program per sampler),
  the second of two identical rounds after ``block_until_ready``, less the compile time JAX
  reports in it; ``compile_s`` is the first round's;
* ``useful_grads``: gradient evaluations the chains needed, warmup included: NUTS and the HMC
  variants, ``num_integration_steps`` of every transition (velocity Verlet: one gradient per
  step); MEADS's warmup leaves out the frozen fold's steps (computed and thrown away); adjusted
  MCLMC, two per integration step (the McLachlan scheme's two gradients; the tuner reports
  its steps as a per-chain total, and a fractional ``L / step_size`` that runs
  ``ceil(L / step_size)`` steps is counted as those);
* ``min_ess_bulk``/``min_ess_tail`` by ``bench/gpu/ess.py`` as numpyro_gpu.py;
* ``lockstep_efficiency``: useful / executed lane-steps, ``chains x max over chains`` per
  iteration (over sampling only for ``laps``, whose tuner gives totals only:
  ``lockstep_scope``);
* ``divergences``: after warmup, summed over chains (``is_divergent``).

A failing row (e.g. out of memory) is reported in its ``error`` field and the script goes on;
an ensemble sampler on too few chains (ChEES on 1, MEADS on fewer than 8) is not run, its row
says why in ``not_applicable``.
Run from the repository root: ``python bench/gpu/blackjax_gpu.py --chains 64,1024 > bj.jsonl``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

GPU_DIR = os.path.dirname(os.path.abspath(__file__))
BENCH_DIR = os.path.dirname(GPU_DIR)
sys.path.insert(0, BENCH_DIR)
sys.path.insert(0, GPU_DIR)

from ess import ESS_METHOD  # noqa: E402  (bench/gpu/ess.py)
from numpyro_gpu import (  # noqa: E402
    DEFAULT_CHAINS, DEFAULT_MODELS, CompileClock, ir_data, lockstep, log, min_ess, use_compile_cache,
)

SAMPLERS = ["nuts", "chees", "meads", "laps"]
CHEES_LEARNING_RATE = 0.025
CHEES_INITIAL_STEP_SIZE = 0.1
LAPS_TARGET_ACCEPTANCE = 0.9
# adjusted_mclmc_find_L_and_step_size tunes for frac_tune1 + frac_tune2 of num_steps, then
# (diagonal preconditioning) frac_tune1 again: 0.3 of num_steps with the defaults.
LAPS_TUNING_FRACTION = 0.3
MCLMC_GRADS_PER_STEP = 2  # isokinetic McLachlan: two gradients per step (the last is reused)
MEADS_FOLDS = 4


def numpyro_target(model: str):
    """``(logdensity, constrain, sites)``: the log density of the unconstrained position (a
    dict of sites), the map to the constrained sample sites, and each site's unconstrained
    shape."""
    import jax
    import numpyro_models
    from numpyro.infer.util import initialize_model

    model_fn = numpyro_models._MODELS[model]
    data = {k: jax.numpy.asarray(v) for k, v in ir_data(model).items()}
    info = initialize_model(jax.random.PRNGKey(0), model_fn, model_kwargs=data,
                            dynamic_args=False)
    sites = {name: tuple(np.shape(value)) for name, value in info.param_info.z.items()}
    potential_fn, postprocess_fn = info.potential_fn, info.postprocess_fn
    sample_sites = [name for name, site in info.model_trace.items()
                    if site["type"] == "sample" and not site["is_observed"]]

    def logdensity(position):
        return -potential_fn(position)

    def constrain(position):
        values = postprocess_fn(position)
        return {name: values[name] for name in sample_sites}

    return logdensity, constrain, sites


def initial_positions(key, sites, n_chains):
    """NumPyro's ``init_to_uniform``: uniform(-2, 2) on each unconstrained coordinate."""
    import jax

    keys = jax.random.split(key, len(sites))
    return {name: jax.random.uniform(k, (n_chains,) + shape, minval=-2.0, maxval=2.0)
            for k, (name, shape) in zip(keys, sites.items())}


def build_nuts(logdensity, n_chains, warmup, draws):
    import jax
    import blackjax
    from blackjax.adaptation.base import get_filter_adapt_info_fn

    adaptation = blackjax.window_adaptation(
        blackjax.nuts, logdensity,
        adaptation_info_fn=get_filter_adapt_info_fn(info_keys={"num_integration_steps"}))

    def run(key, positions):
        warm_key, draw_key = jax.random.split(key)
        (states, params), info = jax.vmap(lambda k, p: adaptation.run(k, p, num_steps=warmup))(
            jax.random.split(warm_key, n_chains), positions)
        warm_steps = info.info.num_integration_steps  # (chains, warmup)

        def step(states, key):
            def one(k, s, p):
                return blackjax.nuts(logdensity, **p).step(k, s)

            states, info = jax.vmap(one)(jax.random.split(key, n_chains), states, params)
            return states, (states.position, info.num_integration_steps, info.is_divergent)

        _, (positions, steps, divergent) = jax.lax.scan(step, states, jax.random.split(draw_key, draws))
        return positions, warm_steps, steps.T, divergent.T, {}

    return run


def build_chees(logdensity, n_chains, warmup, draws, mass_matrix="diagonal"):
    import jax
    import optax
    import blackjax

    adaptation = blackjax.chees_adaptation(
        logdensity, n_chains, mass_matrix_estimation=mass_matrix,
        adaptation_info_fn=blackjax.adaptation.base.get_filter_adapt_info_fn(
            info_keys={"num_integration_steps"}))
    optim = optax.adam(CHEES_LEARNING_RATE, b1=0.0, b2=0.95)

    def run(key, positions):
        warm_key, draw_key = jax.random.split(key)
        (states, params), info = adaptation.run(warm_key, positions, CHEES_INITIAL_STEP_SIZE,
                                                optim, warmup)
        warm_steps = info.info.num_integration_steps.T  # (chains, warmup)
        kernel = blackjax.dhmc(logdensity, **params).step

        def step(states, key):
            states, info = jax.vmap(kernel)(jax.random.split(key, n_chains), states)
            return states, (states.position, info.num_integration_steps, info.is_divergent)

        _, (positions, steps, divergent) = jax.lax.scan(step, states, jax.random.split(draw_key, draws))
        return positions, warm_steps, steps.T, divergent.T, {}

    return run


def too_few_chains(sampler: str, n_chains: int) -> str | None:
    """Why an ensemble sampler cannot run on ``n_chains`` chains, or None: ChEES adapts on
    the spread across chains, MEADS on it within each fold (its eigenvalue estimate divides
    by ``n * (n - 1)``)."""
    if sampler.startswith("chees") and n_chains < 2:
        return "ChEES adapts across chains: needs 2 or more"
    if sampler == "meads" and n_chains < 2 * MEADS_FOLDS:
        return f"MEADS adapts within {MEADS_FOLDS} folds: needs 2 or more chains in each"
    return None


def meads_folds(n_chains: int) -> int:
    """MEADS's default 4 folds, or 1 where the chains do not divide into them."""
    return MEADS_FOLDS if n_chains % MEADS_FOLDS == 0 else 1


def build_meads(logdensity, n_chains, warmup, draws):
    import jax
    import jax.numpy as jnp
    import blackjax

    folds = meads_folds(n_chains)
    adaptation = blackjax.meads_adaptation(
        logdensity, n_chains, num_folds=folds,
        adaptation_info_fn=blackjax.adaptation.base.get_filter_adapt_info_fn(
            info_keys={"num_integration_steps"}))

    def run(key, positions):
        warm_key, draw_key = jax.random.split(key)
        (states, params), info = adaptation.run(warm_key, positions, warmup)
        warm_steps = info.info.num_integration_steps.T  # (chains, warmup)
        kernel = blackjax.ghmc(logdensity, **params).step

        def step(states, key):
            states, info = jax.vmap(kernel)(jax.random.split(key, n_chains), states)
            steps = jnp.broadcast_to(jnp.asarray(info.num_integration_steps), (n_chains,))
            return states, (states.position, steps, info.is_divergent)

        _, (positions, steps, divergent) = jax.lax.scan(step, states, jax.random.split(draw_key, draws))
        return positions, warm_steps, steps.T, divergent.T, {}

    return run


def build_laps(logdensity, n_chains, warmup, draws):
    import jax
    import jax.numpy as jnp
    import blackjax
    from blackjax.mcmc.adjusted_mclmc_dynamic import make_random_trajectory_length_fn

    static_kernel = blackjax.mcmc.adjusted_mclmc.build_kernel()

    def tuning_kernel(rng_key, state, logdensity_fn, step_size, integration_steps_params=(1,),
                      inverse_mass_matrix=1.0, L_proposal_factor=jnp.inf):
        # The tuner runs the static kernel with a fractional L / step_size, which integrates
        # ceil(L / step_size) steps (a fori_loop over floats) but reports the fraction: count
        # the steps that ran.
        state, info = static_kernel(rng_key, state, logdensity_fn, step_size,
                                    integration_steps_params, inverse_mass_matrix,
                                    L_proposal_factor)
        # A chain whose tuning failed (NaN L / step_size) ran no steps.
        n = info.num_integration_steps
        return state, info._replace(num_integration_steps=jnp.where(jnp.isfinite(n), jnp.ceil(n), 0.0))

    num_steps = math.ceil(warmup / LAPS_TUNING_FRACTION)
    steps_fn = make_random_trajectory_length_fn(True)

    def tune(key, position):
        init_key, tune_key = jax.random.split(key)
        state = blackjax.mcmc.adjusted_mclmc.init(position, logdensity)
        state, params, tuning_steps = blackjax.adjusted_mclmc_find_L_and_step_size(
            tuning_kernel, logdensity_fn=logdensity, num_steps=num_steps, state=state,
            rng_key=tune_key, target=LAPS_TARGET_ACCEPTANCE, diagonal_preconditioning=True)
        algorithm = blackjax.adjusted_mclmc_dynamic(
            logdensity, step_size=params.step_size, integration_steps_fn=steps_fn,
            integration_steps_params=(jnp.maximum(1.0, params.L / params.step_size),),
            inverse_mass_matrix=params.inverse_mass_matrix)
        return algorithm.init(state.position, rng_key=init_key), params, tuning_steps

    def run(key, positions):
        warm_key, draw_key = jax.random.split(key)
        states, params, tuning_steps = jax.vmap(tune)(jax.random.split(warm_key, n_chains), positions)

        def one(k, s, p):
            algorithm = blackjax.adjusted_mclmc_dynamic(
                logdensity, step_size=p.step_size, integration_steps_fn=steps_fn,
                integration_steps_params=(jnp.maximum(1.0, p.L / p.step_size),),
                inverse_mass_matrix=p.inverse_mass_matrix)
            return algorithm.step(k, s)

        def step(states, key):
            states, info = jax.vmap(one)(jax.random.split(key, n_chains), states, params)
            # A NaN mean trajectory length (failed tuning) casts to an arbitrary int; such a
            # trajectory runs no steps when negative.
            steps = jnp.maximum(info.num_integration_steps, 0)
            return states, (states.position, steps, info.is_divergent)

        _, (positions, steps, divergent) = jax.lax.scan(step, states, jax.random.split(draw_key, draws))
        warm_total = jnp.asarray(tuning_steps, dtype=jnp.float32)[:, None]  # (chains, 1) totals
        failed = ~(jnp.isfinite(params.step_size) & jnp.isfinite(params.L))
        return positions, warm_total, steps.T, divergent.T, {"laps_failed_tuning_chains": failed.sum()}

    return run


def build_chees_unit(logdensity, n_chains, warmup, draws):
    return build_chees(logdensity, n_chains, warmup, draws, mass_matrix=None)


BUILDERS = {"nuts": build_nuts, "chees": build_chees, "meads": build_meads, "laps": build_laps,
            "chees_unit": build_chees_unit}


def build_round(model: str, sampler: str, n_chains: int, warmup: int, draws: int):
    """A jitted ``key -> (constrained draws by site (chains, draws, ...), warmup steps
    (chains, iterations; laps: totals), sampling steps (chains, draws), divergent (chains,
    draws), extra fields of the row)``."""
    import jax

    logdensity, constrain, sites = numpyro_target(model)
    run = BUILDERS[sampler](logdensity, n_chains, warmup, draws)

    @jax.jit
    def one_round(key):
        init_key, run_key = jax.random.split(key)
        positions, warm_steps, steps, divergent, extra = run(
            run_key, initial_positions(init_key, sites, n_chains))
        # positions: each site (draws, chains, ...) -> constrained (chains, draws, ...)
        constrained = jax.vmap(jax.vmap(constrain))(positions)
        constrained = jax.tree.map(lambda x: jax.numpy.swapaxes(x, 0, 1), constrained)
        return constrained, warm_steps, steps, divergent, extra

    return one_round


def timed(one_round, key):
    import jax

    started = time.perf_counter()
    out = jax.block_until_ready(one_round(key))
    return time.perf_counter() - started, out


def make_row(model, sampler, n_chains, args, *, wall, compile_s, warm_steps, sample_steps,
             diverging, samples, **fields):
    import jax
    import blackjax

    grads_per_step = MCLMC_GRADS_PER_STEP if sampler == "laps" else 1
    diagnostics_started = time.perf_counter()
    bulk, tail = min_ess(samples)
    diagnostics_s = time.perf_counter() - diagnostics_started
    sample_steps = np.asarray(sample_steps, dtype=np.int64)
    warm_steps = np.rint(np.asarray(warm_steps, dtype=np.float64)).astype(np.int64)
    useful_draws, executed_draws = lockstep(sample_steps)
    if sampler == "laps":
        useful_warm, executed_warm, scope = int(warm_steps.sum()), 0, "draws"
        useful_lockstep, executed_lockstep = useful_draws, executed_draws
    else:
        useful_warm, executed_warm = lockstep(warm_steps)
        scope = "warmup+draws"
        if sampler == "meads":
            # One fold of chains is frozen at each warmup step: its steps are computed, then
            # thrown away (not useful; still executed).
            folds = meads_folds(n_chains)
            useful_warm = useful_warm * (folds - 1) // folds if folds > 1 else useful_warm
        useful_lockstep = useful_warm + useful_draws
        executed_lockstep = executed_warm + executed_draws
    useful = grads_per_step * (useful_warm + useful_draws)
    device = jax.devices()[0]
    return {
        "kind": "row",
        "framework": "blackjax",
        "sampler": sampler,
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
        "warmup_grads": grads_per_step * useful_warm,
        "grads_per_s": useful / wall,
        "min_ess_bulk": bulk,
        "min_ess_tail": tail,
        "min_ess_bulk_per_s": bulk / wall,
        "min_ess_tail_per_s": tail / wall,
        "ess_method": ESS_METHOD,
        "lockstep_efficiency": useful_lockstep / executed_lockstep if executed_lockstep else None,
        "lockstep_scope": scope,
        "divergences": int(np.asarray(diverging).sum()),
        "diagnostics_s": diagnostics_s,
        "adapter": getattr(device, "device_kind", str(device)),
        "jax_backend": jax.default_backend(),
        "blackjax_version": blackjax.__version__,
        "jax_version": jax.__version__,
    }


def measure(model, sampler, n_chains, args, clock):
    import jax

    one_round = build_round(model, sampler, n_chains, args.warmup, args.draws)
    first_key, timed_key = jax.random.split(jax.random.PRNGKey(args.seed))
    clock.reset()
    first, _ = timed(one_round, first_key)
    compile_s = clock.seconds()
    log(f"  ({model}, {sampler}, {n_chains} chains: first round {first:.1f} s, compile {compile_s:.1f} s)")
    clock.reset()
    wall, (samples, warm_steps, steps, divergent, extra) = timed(one_round, timed_key)
    recompile_s = clock.seconds()
    log(f"  ({model}, {sampler}, {n_chains} chains: timed round {wall:.1f} s, compile "
        f"{recompile_s:.2f} s (excluded); ESS next)")
    samples = {name: np.asarray(value) for name, value in samples.items()}
    return make_row(model, sampler, n_chains, args, wall=wall - recompile_s, compile_s=compile_s,
                    warm_steps=warm_steps, sample_steps=steps, diverging=divergent,
                    samples=samples, first_round_s=first, timed_round_s=wall,
                    timed_round_compile_s=recompile_s,
                    **{k: int(v) for k, v in extra.items()}), samples


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--chains", default=",".join(map(str, DEFAULT_CHAINS)))
    parser.add_argument("--warmup", type=int, default=400)
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--x64", action="store_true", help="float64 (default: float32)")
    parser.add_argument("--platform", choices=["cpu", "gpu"], help="JAX platform (default: JAX's)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="start no new row after this many seconds")
    parser.add_argument("--compile-cache", help="JAX's persistent compilation cache directory")
    parser.add_argument("--save-draws", help="directory: keep each row's constrained draws "
                        "as <model>-<sampler>-<chains>.npz (for checks)")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    samplers = [s for s in args.samplers.split(",") if s]
    unknown = sorted(set(samplers) - set(BUILDERS))
    if unknown:
        parser.error(f"unknown samplers {unknown}; known: {sorted(BUILDERS)}")
    chain_counts = [int(c) for c in args.chains.split(",") if c]

    import numpyro
    if args.platform:
        numpyro.set_platform(args.platform)
    if args.x64:
        numpyro.enable_x64()
    import jax
    import blackjax

    if args.compile_cache:
        use_compile_cache(args.compile_cache)
    log(f"BlackJAX {blackjax.__version__}, NumPyro {numpyro.__version__}, JAX {jax.__version__} "
        f"on {jax.devices()[0]}; ESS: {ESS_METHOD}")
    clock = CompileClock()
    started = time.perf_counter()
    for model in models:
        log(f"\n{model}\n| sampler | chains | wall s | compile s | useful grad evals/s | min bulk-ESS/s "
            "| min tail-ESS/s | lockstep eff. | divergences |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for sampler in samplers:
            for n_chains in chain_counts:
                base = {"kind": "row", "framework": "blackjax", "sampler": sampler,
                        "model": model, "chains": n_chains}
                reason = too_few_chains(sampler, n_chains)
                if reason:
                    log(f"| {sampler} | {n_chains} | not applicable: {reason} |")
                    row = {**base, "not_applicable": reason}
                elif args.time_limit is not None and time.perf_counter() - started > args.time_limit:
                    log(f"| {sampler} | {n_chains} | skipped: past --time-limit |")
                    row = {**base, "skipped": True}
                else:
                    try:
                        row, samples = measure(model, sampler, n_chains, args, clock)
                    except Exception as err:  # one failed row (e.g. out of memory) is data too
                        log(f"| {sampler} | {n_chains} | failed: {err!r} |")
                        row = {**base, "error": repr(err)[:500]}
                    else:
                        if args.save_draws:
                            os.makedirs(args.save_draws, exist_ok=True)
                            np.savez(os.path.join(args.save_draws, f"{model}-{sampler}-{n_chains}.npz"),
                                     **samples)
                        eff = row["lockstep_efficiency"]
                        log(f"| {sampler} | {n_chains} | {row['wall_s']:.2f} | {row['compile_s']:.1f} "
                            f"| {row['grads_per_s']:.3e} | {row['min_ess_bulk_per_s']:.4g} "
                            f"| {row['min_ess_tail_per_s']:.4g} "
                            f"| {'–' if eff is None else f'{eff:.2f}'} | {row['divergences']} |")
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
