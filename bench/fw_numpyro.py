"""NumPyro's NUTS on JAX (CPU, float64) on the models of ``numpyro_models.py``.

Several chains run in parallel (``jax.pmap``, as ``chain_method="parallel"``, see
``_cached_pmap``) over 4 virtual host devices (``numpyro.set_host_device_count``), which share
the machine's cores, as NumPyro's docs recommend for CPU.
Compile time: the first (untimed) full run of a chain count minus the timed run that follows:
the JIT compilation of the warmup and sampling loops. The MCMC object is kept, so later seeds
reuse the compiled loops.
Timing: ``MCMC.warmup`` then ``MCMC.run`` from the post-warmup state; the sampling time is the
wall time of ``run`` (all chains at once; results blocked on).
"""
from __future__ import annotations

import time

import numpyro

from numpyro_jit import memoize_maybe_jit

numpyro.set_host_device_count(4)
numpyro.enable_x64()


memoize_maybe_jit()  # compile the sampling loops once (numpyro_jit.py)

_PMAPPED = {}


def _cached_pmap(chain_fn):
    """``chain_method="parallel"`` (``jax.pmap`` over the chains), compiled once.

    ``MCMC.run`` hands its chain method a fresh ``functools.partial`` of
    ``MCMC._single_chain_mcmc`` at every call, so the stock ``pmap`` recompiled the sampler
    for every ``warmup`` and ``run`` (1.5 s each on ``simple``). This is NumPyro's hook for a
    custom chain method; the key holds everything the traced computation depends on: the MCMC
    object, its data arrays, the collected fields and the phase (warmup or sampling).
    """
    mcmc = chain_fn.func.__self__
    kw = chain_fn.keywords
    key = (
        chain_fn.func.__func__, id(mcmc),
        tuple(id(leaf) for leaf in jax.tree.leaves(kw["args"])),
        tuple((name, id(value)) for name, value in sorted(kw["kwargs"].items())),
        tuple(kw["collect_fields"]), tuple(kw["remove_sites"]),
        tuple(sorted(mcmc._collection_params.items(), key=lambda item: item[0])),
    )
    if key not in _PMAPPED:
        _PMAPPED[key] = jax.pmap(chain_fn)
    return _PMAPPED[key]

import jax  # noqa: E402  (after the device count and x64 are set)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from numpyro.infer import MCMC, NUTS  # noqa: E402
from numpyro.infer.util import potential_energy  # noqa: E402

import numpyro_models  # noqa: E402
from common import NUM_DRAWS, NUM_WARMUP, params  # noqa: E402
from frameworks import LogDensityValues, SampleRun  # noqa: E402

FIELDS = ("num_steps", "diverging")


class Adapter:
    name = "numpyro"
    parity_source = "-numpyro.infer.util.potential_energy and its jax.grad"

    def __init__(self, **_):
        self.model = None
        self.mcmc = {}

    def versions(self):
        import jaxlib

        return {"numpyro": numpyro.__version__, "jax": jax.__version__,
                "jaxlib": jaxlib.__version__}

    def prepare(self, model):
        self.model = model
        start = time.perf_counter()
        self.model_fn, self.kwargs = numpyro_models.build(model)
        return time.perf_counter() - start

    def _split(self, u):
        out, i = {}, 0
        for p in params(self.model):
            out[p.name] = u[i] if p.size is None else u[i:i + p.length]
            i += p.length
        return out

    def log_density(self, points):
        def logp(u):
            return -potential_energy(self.model_fn, (), self.kwargs, self._split(u))

        value_and_grad = jax.jit(jax.value_and_grad(logp))
        lps, grads = [], []
        for u in points:
            lp, g = value_and_grad(jnp.asarray(u, dtype=jnp.float64))
            lps.append(float(lp))
            grads.append(np.asarray(g))
        return LogDensityValues(np.array(lps), np.array(grads))

    def _mcmc(self, chains):
        if chains not in self.mcmc:
            self.mcmc[chains] = MCMC(
                NUTS(self.model_fn), num_warmup=NUM_WARMUP, num_samples=NUM_DRAWS,
                num_chains=chains, chain_method=_cached_pmap if chains > 1 else "sequential",
                progress_bar=False)
        return self.mcmc[chains]

    def warm_up(self, chains):
        start = time.perf_counter()
        self.sample(chains, 12345)
        return time.perf_counter() - start

    def sample(self, chains, seed):
        mcmc = self._mcmc(chains)
        start = time.perf_counter()
        mcmc.warmup(jax.random.PRNGKey(seed), extra_fields=FIELDS, collect_warmup=True,
                    **self.kwargs)
        warm = jax.block_until_ready(mcmc.get_extra_fields(group_by_chain=True))
        middle = time.perf_counter()
        mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=FIELDS, **self.kwargs)
        samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
        fields = jax.block_until_ready(mcmc.get_extra_fields(group_by_chain=True))
        end = time.perf_counter()
        return SampleRun(
            draws={p.name: np.asarray(samples[p.name]) for p in params(self.model)},
            n_grad=np.asarray(fields["num_steps"], dtype=float),
            n_grad_warmup=np.asarray(warm["num_steps"], dtype=float),
            divergent=np.asarray(fields["diverging"], dtype=bool),
            wall_seconds=end - start,
            native_sampling_seconds=end - middle,
        )
