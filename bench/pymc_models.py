"""The seven benchmark models in PyMC, same density and parameter order as ``models/*.json``.

Free random variables are created in the order of our IR's parameters, so PyMC's value
variables (``sigma_log__`` for a positive ``sigma``: PyMC's default log transform, the same as
Stan's ``lower=0``) line up with our unconstrained vector. No deterministics are added: the
benchmark's ESS is over parameters only, and storing ``theta`` would only slow PyMC down.
"""
from __future__ import annotations

import numpy as np
import pymc as pm

from common import model_data


def _simple(m, d):
    mu = pm.Normal("mu", 0.0, 10.0)
    sigma = pm.Exponential("sigma", 1.0)
    pm.Normal("y", mu, sigma, observed=d["y"])


def _medium(m, d):
    mu_g = pm.Normal("mu_g", 0.0, 10.0)
    sigma_g = pm.Exponential("sigma_g", 1.0)
    alpha = pm.Normal("alpha", mu_g, sigma_g)
    beta = pm.Normal("beta", mu_g, sigma_g)
    sigma_obs = pm.Exponential("sigma_obs", 2.0)
    pm.Normal("y_a", alpha, sigma_obs, observed=d["y_a"])
    pm.Normal("y_b", beta, sigma_obs, observed=d["y_b"])


def _stress(m, d):
    mu_pop = pm.Normal("mu_pop", 0.0, 10.0)
    sigma_pop = pm.Exponential("sigma_pop", 0.5)
    groups = [pm.Normal(f"group_{j}", mu_pop, sigma_pop) for j in (1, 2, 3)]
    noises = [pm.Exponential(f"noise_{j}", 1.0) for j in (1, 2, 3)]
    for j in (1, 2, 3):
        pm.Normal(f"y_{j}", groups[j - 1], noises[j - 1], observed=d[f"y_{j}"])


def _eight_schools(m, d):
    mu = pm.Normal("mu", 0.0, 5.0)
    tau = pm.HalfNormal("tau", 5.0)
    theta = pm.Normal("theta", mu, tau, shape=len(d["y"]))
    pm.Normal("y", theta, d["sigma"], observed=d["y"])


def _eight_schools_noncentered(m, d):
    mu = pm.Normal("mu", 0.0, 5.0)
    tau = pm.HalfNormal("tau", 5.0)
    z = pm.Normal("z", 0.0, 1.0, shape=len(d["y"]))
    pm.Normal("y", mu + tau * z, d["sigma"], observed=d["y"])


def _funnel(m, d):
    y = pm.Normal("y", 0.0, 3.0)
    pm.Normal("x", 0.0, pm.math.exp(y / 2.0), shape=9)


def _logistic(m, d):
    alpha = pm.Normal("alpha", 0.0, 10.0)
    beta = pm.Normal("beta", 0.0, 10.0, shape=d["X"].shape[1])
    pm.Bernoulli("y", logit_p=alpha + pm.math.dot(d["X"], beta), observed=d["y"])


def _sv(m, d):
    returns = d["returns"]
    sigma = pm.Exponential("sigma", 50.0)
    nu = pm.Exponential("nu", 0.1)
    # s_1 ~ N(0, sigma), s_t ~ N(s_{t-1}, sigma): the walk of bench-models.md (not N(0, 100)).
    s = pm.GaussianRandomWalk("s", mu=0.0, sigma=sigma, init_dist=pm.Normal.dist(0.0, sigma),
                              steps=len(returns) - 1)
    pm.StudentT("returns", nu=nu, mu=0.0, sigma=pm.math.exp(s), observed=returns)


_BUILDERS = {
    "simple": _simple, "medium": _medium, "stress": _stress, "eight_schools": _eight_schools,
    "eight_schools_noncentered": _eight_schools_noncentered, "funnel": _funnel,
    "logistic": _logistic, "sv": _sv,
}


def build(model: str) -> pm.Model:
    """The PyMC model of one benchmark model, with its data."""
    d = model_data(model)
    with pm.Model() as m:
        _BUILDERS[model](m, d)
    return m


def value_var_names(m: pm.Model) -> list[str]:
    """Names of the value (unconstrained) variables, in the order of the free variables."""
    return [m.rvs_to_values[rv].name for rv in m.free_RVs]


def unconstrained_point(m: pm.Model, model: str, u: np.ndarray) -> dict[str, np.ndarray]:
    """Our unconstrained vector as PyMC's point dict (value-variable name -> value)."""
    from common import params

    point, i = {}, 0
    for p, rv in zip(params(model), m.free_RVs, strict=True):
        value_name = m.rvs_to_values[rv].name
        if rv.name != p.name or value_name != (p.name + "_log__" if p.positive else p.name):
            raise ValueError(f"{model}: PyMC variable {rv.name} ({value_name}) does not match "
                             f"our parameter {p.name} (positive={p.positive})")
        v = np.asarray(u[i:i + p.length], dtype=float)
        point[value_name] = np.array(v[0]) if p.size is None else v
        i += p.length
    return point
