"""Shared definitions of the benchmark harness: paths, models, data, parameter layouts.

Every framework samples the same seven models (eight files) of ``bench/MODELS.md`` on
the same data (``bench/data/bench_data.json``). The parameter layout (names, sizes, whether a
parameter is constrained positive) is read from our IR files ``models/<model>.json``, so the
unconstrained vector of every framework is ordered exactly as ours: a positive parameter ``x``
is ``u = log(x)`` there, with log-Jacobian ``u`` (the transform of Stan, PyMC and NumPyro alike).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
DATA_PATH = os.environ.get(
    "BENCH_DATA", os.path.join(BENCH_DIR, "data", "bench_data.json")
)
STAN_DIR = os.path.join(BENCH_DIR, "stan")
STAN_PARITY_DIR = os.path.join(ROOT, "sampler", "tests", "fixtures", "stan_parity")
PARITY_FIXTURE_DIR = os.path.join(BENCH_DIR, "fixtures", "parity")
WORK_DIR = os.path.join(BENCH_DIR, ".work")

MODELS = ["simple", "medium", "stress", "eight_schools", "eight_schools_noncentered",
          "funnel", "logistic", "sv"]
FRAMEWORKS = ["ours", "stan", "nutpie", "pymc", "numpyro"]
PEERS = [f for f in FRAMEWORKS if f != "ours"]

# The protocol of bench/MODELS.md and issue 5.
NUM_WARMUP = 1000
NUM_DRAWS = 1000
DIVERGENCE_FLAG_FRACTION = 0.01


@dataclass(frozen=True)
class Param:
    """One declared parameter of a model: a scalar (size None) or a vector."""

    name: str
    size: int | None
    positive: bool

    @property
    def length(self) -> int:
        return 1 if self.size is None else self.size

    def columns(self) -> list[str]:
        """Scalar column names, Stan style: ``mu``, ``z.1`` ... ``z.8``."""
        if self.size is None:
            return [self.name]
        return [f"{self.name}.{i + 1}" for i in range(self.size)]


@lru_cache(maxsize=None)
def params(model: str) -> tuple[Param, ...]:
    """The parameters of ``models/<model>.json`` in declaration (= unconstrained) order."""
    with open(os.path.join(ROOT, "models", model + ".json")) as f:
        ir = json.load(f)
    out = []
    for p in ir["parameters"]:
        constraint = p.get("constraint", "real")
        if constraint not in ("real", "positive"):
            raise ValueError(f"{model}: parameter {p['name']}: constraint {constraint!r} "
                             "is not handled by the harness")
        out.append(Param(p["name"], p.get("size"), constraint == "positive"))
    return tuple(out)


def dim(model: str) -> int:
    return sum(p.length for p in params(model))


def split_unconstrained(model: str, u: np.ndarray) -> dict[str, np.ndarray]:
    """Splits an unconstrained vector into one entry per parameter (still unconstrained)."""
    out, i = {}, 0
    for p in params(model):
        v = np.asarray(u[i:i + p.length], dtype=float)
        out[p.name] = v[0] if p.size is None else v
        i += p.length
    return out


@lru_cache(maxsize=None)
def bench_data() -> dict:
    with open(DATA_PATH) as f:
        return json.load(f)


def model_data(model: str) -> dict[str, np.ndarray]:
    """The observations of one model as numpy arrays (float, except logistic's 0/1 ``y``)."""
    d = bench_data()
    if model == "simple":
        return {"y": np.array(d["simple"]["y"], dtype=float)}
    if model == "medium":
        return {k: np.array(d["medium"][k], dtype=float) for k in ("y_a", "y_b")}
    if model == "stress":
        return {f"y_{j}": np.array(d["stress"][f"y_{j}"], dtype=float) for j in (1, 2, 3)}
    if model in ("eight_schools", "eight_schools_noncentered"):
        return {k: np.array(d["eight_schools"][k], dtype=float) for k in ("y", "sigma")}
    if model == "funnel":
        return {}
    if model == "logistic":
        return {"X": np.array(d["logistic"]["X"], dtype=float),
                "y": np.array(d["logistic"]["y"], dtype=np.int64)}
    if model == "sv":
        return {"returns": np.array(d["sv"]["returns"], dtype=float)}
    raise KeyError(model)


@dataclass(frozen=True)
class StanFixture:
    """``sampler/tests/fixtures/stan_parity/<model>.json``: Stan's log density and gradient at
    20 unconstrained points, known (by the Rust test ``stan_parity``) to equal ours up to a
    constant."""

    model: str
    points: np.ndarray
    log_density: np.ndarray
    gradient: np.ndarray


def stan_fixture(model: str) -> StanFixture:
    path = os.path.join(STAN_PARITY_DIR, model + ".json")
    with open(path) as f:
        fx = json.load(f)
    names = [p.name for p in params(model)]
    if fx["parameters"] != names or fx["dim"] != dim(model):
        raise ValueError(f"{path}: parameters {fx['parameters']} do not match models/{model}.json {names}")
    return StanFixture(model, np.array(fx["points"]), np.array(fx["log_density"]),
                       np.array(fx["gradient"]))


def rel(path: str) -> str:
    """A path relative to the repository root, for messages and records."""
    return os.path.relpath(path, ROOT)
