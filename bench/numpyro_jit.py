"""Makes NumPyro reuse its compiled sampling loops across ``MCMC.warmup``/``MCMC.run`` calls, so
that a timed call runs the sampler and compiles nothing (the CPU and the GPU arms both use it).

NumPyro's ``fori_collect`` (0.21, 0.22) wraps its (cached) loop body in a fresh ``jax.jit`` at
every call and passes that wrapper to the jitted loop as a static argument; a fresh wrapper
hashes differently, so every call lowered and compiled the whole sampler again (2 s for the
simplest model on a CPU; 6.6 s for sv's two loops at 16 chains), which a user running a model
repeatedly pays but which is compilation, not sampling. Memoizing ``maybe_jit`` on (function,
options) gives the loop the same wrapper each time; the sampler's computation is unchanged.
"""
from __future__ import annotations

import numpyro.util

_INSTALLED = False


def memoize_maybe_jit() -> None:
    """Installs the memo (once per process)."""
    global _INSTALLED
    if _INSTALLED:
        return
    original = numpyro.util.maybe_jit
    cache = {}

    def maybe_jit(fn, *args, **kwargs):
        key = (fn, args, tuple(sorted(kwargs.items())))
        try:
            if key not in cache:
                cache[key] = original(fn, *args, **kwargs)
            return cache[key]
        except TypeError:  # unhashable options: no memo
            return original(fn, *args, **kwargs)

    numpyro.util.maybe_jit = maybe_jit
    _INSTALLED = True
