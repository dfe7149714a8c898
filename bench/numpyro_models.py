"""The seven benchmark models in NumPyro, same density and parameter order as ``models/*.json``.

Sample sites are declared in the order of our IR's parameters; vector parameters are one site
each (``.expand([n]).to_event(1)``). Positive parameters have support ``positive``, whose
bijection in NumPyro is ``exp`` (as Stan's ``lower=0``). NumPyro runs in float64 here
(``numpyro.enable_x64()`` in ``fw_numpyro``) so that it computes with the precision of the
other frameworks.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from common import model_data


def simple(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    sigma = numpyro.sample("sigma", dist.Exponential(1.0))
    numpyro.sample("y", dist.Normal(mu, sigma), obs=y)


def medium(y_a, y_b):
    mu_g = numpyro.sample("mu_g", dist.Normal(0.0, 10.0))
    sigma_g = numpyro.sample("sigma_g", dist.Exponential(1.0))
    alpha = numpyro.sample("alpha", dist.Normal(mu_g, sigma_g))
    beta = numpyro.sample("beta", dist.Normal(mu_g, sigma_g))
    sigma_obs = numpyro.sample("sigma_obs", dist.Exponential(2.0))
    numpyro.sample("y_a", dist.Normal(alpha, sigma_obs), obs=y_a)
    numpyro.sample("y_b", dist.Normal(beta, sigma_obs), obs=y_b)


def stress(y_1, y_2, y_3):
    mu_pop = numpyro.sample("mu_pop", dist.Normal(0.0, 10.0))
    sigma_pop = numpyro.sample("sigma_pop", dist.Exponential(0.5))
    groups = [numpyro.sample(f"group_{j}", dist.Normal(mu_pop, sigma_pop)) for j in (1, 2, 3)]
    noises = [numpyro.sample(f"noise_{j}", dist.Exponential(1.0)) for j in (1, 2, 3)]
    for j, y in zip((1, 2, 3), (y_1, y_2, y_3)):
        numpyro.sample(f"y_{j}", dist.Normal(groups[j - 1], noises[j - 1]), obs=y)


def eight_schools(y, sigma):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfNormal(5.0))
    theta = numpyro.sample("theta", dist.Normal(mu, tau).expand([y.shape[0]]).to_event(1))
    numpyro.sample("y", dist.Normal(theta, sigma).to_event(1), obs=y)


def eight_schools_noncentered(y, sigma):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfNormal(5.0))
    z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([y.shape[0]]).to_event(1))
    numpyro.sample("y", dist.Normal(mu + tau * z, sigma).to_event(1), obs=y)


def funnel():
    y = numpyro.sample("y", dist.Normal(0.0, 3.0))
    numpyro.sample("x", dist.Normal(0.0, jnp.exp(y / 2.0)).expand([9]).to_event(1))


def logistic(X, y):
    alpha = numpyro.sample("alpha", dist.Normal(0.0, 10.0))
    beta = numpyro.sample("beta", dist.Normal(0.0, 10.0).expand([X.shape[1]]).to_event(1))
    numpyro.sample("y", dist.Bernoulli(logits=alpha + X @ beta).to_event(1), obs=y)


def sv(returns):
    sigma = numpyro.sample("sigma", dist.Exponential(50.0))
    nu = numpyro.sample("nu", dist.Exponential(0.1))
    # NumPyro's walk starts at s_1 ~ N(0, scale), as bench-models.md requires.
    s = numpyro.sample("s", dist.GaussianRandomWalk(scale=sigma, num_steps=returns.shape[0]))
    numpyro.sample("returns", dist.StudentT(nu, 0.0, jnp.exp(s)).to_event(1), obs=returns)


_MODELS = {
    "simple": simple, "medium": medium, "stress": stress, "eight_schools": eight_schools,
    "eight_schools_noncentered": eight_schools_noncentered, "funnel": funnel,
    "logistic": logistic, "sv": sv,
}


def build(model: str):
    """``(model_fn, kwargs)``: the NumPyro model function of one benchmark model and its data."""
    d = model_data(model)
    kwargs = {k: jnp.asarray(v) for k, v in d.items()}
    return _MODELS[model], kwargs
