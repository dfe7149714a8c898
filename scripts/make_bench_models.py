#!/usr/bin/env python3
"""Writes the seven benchmark models of bench/MODELS.md as IR JSON files in models/.

Usage: python3 scripts/make_bench_models.py [path/to/bench_data.json]
(default: bench/data/bench_data.json).

The parameter order here is the order of the unconstrained vector; the Stan programs in
bench/stan/ declare their parameters in the same order so that log densities compare point
by point.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "bench", "data", "bench_data.json")


def sample(value, dist, **args):
    return {"sample": {"value": value, "dist": {dist: args}}}


def param(name, size=None, constraint=None):
    p = {"name": name}
    if size is not None:
        p["size"] = size
    if constraint is not None:
        p["constraint"] = constraint
    return p


def model(name, data, parameters, statements, transformed=()):
    m = {"ir_version": 1, "name": name, "data": data, "parameters": parameters}
    if transformed:
        m["transformed"] = list(transformed)
    m["model"] = statements
    return m


def dumps(value, indent=0):
    """JSON with nested objects indented and lists of numbers kept on one line."""
    pad = "  " * (indent + 1)
    compact = json.dumps(value)
    if len(compact) <= 72:
        return compact
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [pad + json.dumps(k) + ": " + dumps(v, indent + 1) for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [pad + dumps(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    return json.dumps(value)


def main():
    d = json.load(open(DATA))
    models = []

    models.append(model(
        "simple",
        {"y": {"vector": d["simple"]["y"]}},
        [param("mu"), param("sigma", constraint="positive")],
        [
            sample("mu", "normal", mu=0, sigma=10),
            sample("sigma", "exponential", rate=1),
            sample("y", "normal", mu="mu", sigma="sigma"),
        ],
    ))

    models.append(model(
        "medium",
        {"y_a": {"vector": d["medium"]["y_a"]}, "y_b": {"vector": d["medium"]["y_b"]}},
        [param("mu_g"), param("sigma_g", constraint="positive"), param("alpha"), param("beta"),
         param("sigma_obs", constraint="positive")],
        [
            sample("mu_g", "normal", mu=0, sigma=10),
            sample("sigma_g", "exponential", rate=1),
            sample("alpha", "normal", mu="mu_g", sigma="sigma_g"),
            sample("beta", "normal", mu="mu_g", sigma="sigma_g"),
            sample("sigma_obs", "exponential", rate=2),
            sample("y_a", "normal", mu="alpha", sigma="sigma_obs"),
            sample("y_b", "normal", mu="beta", sigma="sigma_obs"),
        ],
    ))

    stress_params = [param("mu_pop"), param("sigma_pop", constraint="positive")]
    stress_params += [param(f"group_{j}") for j in (1, 2, 3)]
    stress_params += [param(f"noise_{j}", constraint="positive") for j in (1, 2, 3)]
    stress_statements = [
        sample("mu_pop", "normal", mu=0, sigma=10),
        sample("sigma_pop", "exponential", rate=0.5),
    ]
    for j in (1, 2, 3):
        stress_statements.append(sample(f"group_{j}", "normal", mu="mu_pop", sigma="sigma_pop"))
        stress_statements.append(sample(f"noise_{j}", "exponential", rate=1))
    for j in (1, 2, 3):
        stress_statements.append(sample(f"y_{j}", "normal", mu=f"group_{j}", sigma=f"noise_{j}"))
    models.append(model(
        "stress",
        {f"y_{j}": {"vector": d["stress"][f"y_{j}"]} for j in (1, 2, 3)},
        stress_params,
        stress_statements,
    ))

    schools = {"y": {"vector": d["eight_schools"]["y"]}, "sigma": {"vector": d["eight_schools"]["sigma"]}}
    models.append(model(
        "eight_schools",
        schools,
        [param("mu"), param("tau", constraint="positive"), param("theta", size=8)],
        [
            sample("mu", "normal", mu=0, sigma=5),
            sample("tau", "half_normal", sigma=5),
            sample("theta", "normal", mu="mu", sigma="tau"),
            sample("y", "normal", mu="theta", sigma="sigma"),
        ],
    ))
    models.append(model(
        "eight_schools_noncentered",
        schools,
        [param("mu"), param("tau", constraint="positive"), param("z", size=8)],
        [
            sample("mu", "normal", mu=0, sigma=5),
            sample("tau", "half_normal", sigma=5),
            sample("z", "normal", mu=0, sigma=1),
            sample("y", "normal", mu="theta", sigma="sigma"),
        ],
        transformed=[{"name": "theta", "value": {"add": ["mu", {"mul": ["tau", "z"]}]}}],
    ))

    models.append(model(
        "funnel",
        {},
        [param("y"), param("x", size=9)],
        [
            sample("y", "normal", mu=0, sigma=3),
            sample("x", "normal", mu=0, sigma={"exp": {"mul": ["y", 0.5]}}),
        ],
    ))

    logistic = d["logistic"]
    models.append(model(
        "logistic",
        {"X": {"matrix": logistic["X"]}, "y": {"int_vector": logistic["y"]}},
        [param("alpha"), param("beta", size=logistic["p"])],
        [
            sample("alpha", "normal", mu=0, sigma=10),
            sample("beta", "normal", mu=0, sigma=10),
            sample("y", "bernoulli_logit", logit={"add": ["alpha", {"matvec": ["X", "beta"]}]}),
        ],
    ))

    sv = d["sv"]
    models.append(model(
        "sv",
        {"returns": {"vector": sv["returns"]}},
        [param("sigma", constraint="positive"), param("nu", constraint="positive"),
         param("s", size=sv["T"])],
        [
            sample("sigma", "exponential", rate=50),
            sample("nu", "exponential", rate=0.1),
            sample("s", "gaussian_random_walk", sigma="sigma"),
            sample("returns", "student_t", nu="nu", mu=0, sigma={"exp": "s"}),
        ],
    ))

    os.makedirs(os.path.join(ROOT, "models"), exist_ok=True)
    for m in models:
        path = os.path.join(ROOT, "models", m["name"] + ".json")
        with open(path, "w") as f:
            f.write(dumps(m) + "\n")
        print("wrote", os.path.relpath(path, ROOT))


if __name__ == "__main__":
    main()
