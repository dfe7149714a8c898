#!/usr/bin/env python3
"""Stan log-density parity fixtures for the seven benchmark models (eight programs).

Purpose
    For each program in bench/stan/ (simple, medium, stress, eight_schools,
    eight_schools_noncentered, funnel, logistic, sv) this compiles the Stan program with
    PyStan 3 (httpstan) on its data from bench/data/bench_data.json, draws 20 unconstrained
    points (fixed numpy seed per model) and records Stan's log density, Jacobian of the
    constraining transforms included (`Model.log_prob(x, adjust_transform=True)`), and its
    gradient (`Model.grad_log_prob(x)`, which httpstan evaluates with adjust_transform=True).
    Output: sampler/tests/fixtures/stan_parity/<model>.json, format

        {"model": ..., "stan_file": "bench/stan/<model>.stan", "generator": "...",
         "dim": d, "parameters": [names in declaration order],
         "points": [[d floats] x 20], "log_density": [20 floats], "gradient": [[d floats] x 20]}

    The unconstrained vector is ordered as the parameters of models/<model>.json (= the Stan
    declarations); a lower=0 parameter x is stored as u = log(x) and its log-Jacobian is u.
    Stan's `~` drops constant terms, so these log densities equal any other implementation's
    only up to one constant per model: compare differences between points, and gradients.

Environment (Python 3.11, a C++ compiler; compiling one model takes a minute or two)
    python3 -m venv /tmp/stanenv
    /tmp/stanenv/bin/pip install pystan==3.10.0 numpy scipy
    (used: pystan 3.10.0, httpstan 4.13.0 = Stan 2.35.0 / stanc3 2.35.0, numpy 2.4.6,
    scipy 1.17.1, g++ 12.2, Python 3.11.7.)

Run (from anywhere; paths are relative to the repository root)
    /tmp/stanenv/bin/python scripts/stan_parity_fixtures.py            # all eight models
    /tmp/stanenv/bin/python scripts/stan_parity_fixtures.py sv funnel  # some of them
    /tmp/stanenv/bin/python scripts/stan_parity_fixtures.py --check    # verify the fixtures
    Option --data PATH overrides the default bench/data/bench_data.json.
    Compiled models are cached by httpstan in ~/.cache/httpstan (a rerun skips compilation).

--check (needs numpy and scipy, not pystan) reads the fixture files and compares them with an
    independent numpy/scipy implementation of each log density on the unconstrained scale,
    constants and log-Jacobians included: Stan's value minus ours must be one constant per
    model, and Stan's gradient must match a 4th-order central finite difference of ours.
    It prints the largest deviations and exits non-zero past the tolerances.
"""
import argparse
import json
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(ROOT, "bench", "data", "bench_data.json")
OUT_DIR = os.path.join(ROOT, "sampler", "tests", "fixtures", "stan_parity")
MODELS = ["simple", "medium", "stress", "eight_schools", "eight_schools_noncentered",
          "funnel", "logistic", "sv"]
N_POINTS = 20

# (name, size or None for a scalar, positive?) in declaration order = unconstrained order.
PARAMS = {
    "simple": [("mu", None, False), ("sigma", None, True)],
    "medium": [("mu_g", None, False), ("sigma_g", None, True), ("alpha", None, False),
               ("beta", None, False), ("sigma_obs", None, True)],
    "stress": [("mu_pop", None, False), ("sigma_pop", None, True)]
              + [(f"group_{j}", None, False) for j in (1, 2, 3)]
              + [(f"noise_{j}", None, True) for j in (1, 2, 3)],
    "eight_schools": [("mu", None, False), ("tau", None, True), ("theta", 8, False)],
    "eight_schools_noncentered": [("mu", None, False), ("tau", None, True), ("z", 8, False)],
    "funnel": [("y", None, False), ("x", 9, False)],
    "logistic": [("alpha", None, False), ("beta", 20, False)],
    "sv": [("sigma", None, True), ("nu", None, True), ("s", 100, False)],
}
SEEDS = {m: 20261121 + i for i, m in enumerate(MODELS)}


def dim(model):
    return sum(1 if size is None else size for _, size, _ in PARAMS[model])


def stan_data(model, d):
    """The data block of bench/stan/<model>.stan, built from bench_data.json."""
    if model == "simple":
        y = d["simple"]["y"]
        return {"N": len(y), "y": y}
    if model == "medium":
        m = d["medium"]
        return {"N_a": len(m["y_a"]), "y_a": m["y_a"], "N_b": len(m["y_b"]), "y_b": m["y_b"]}
    if model == "stress":
        out = {}
        for j in (1, 2, 3):
            y = d["stress"][f"y_{j}"]
            out[f"N_{j}"] = len(y)
            out[f"y_{j}"] = y
        return out
    if model in ("eight_schools", "eight_schools_noncentered"):
        e = d["eight_schools"]
        return {"J": len(e["y"]), "y": [float(v) for v in e["y"]],
                "sigma": [float(v) for v in e["sigma"]]}
    if model == "funnel":
        return {}
    if model == "logistic":
        lg = d["logistic"]
        return {"N": len(lg["y"]), "P": len(lg["X"][0]), "X": lg["X"], "y": [int(v) for v in lg["y"]]}
    if model == "sv":
        r = d["sv"]["returns"]
        return {"T": len(r), "returns": r}
    raise KeyError(model)


def draw_points(model):
    """N_POINTS unconstrained points; every one has a finite log density."""
    rng = np.random.default_rng(SEEDS[model])
    n = dim(model)
    if model == "sv":
        pts = np.empty((N_POINTS, n))
        pts[:, 0] = rng.uniform(np.log(0.05), np.log(0.5), N_POINTS)  # sigma in (0.05, 0.5)
        pts[:, 1] = rng.uniform(np.log(2.0), np.log(30.0), N_POINTS)  # nu in (2, 30)
        pts[:, 2:] = rng.uniform(-1.0, 1.0, (N_POINTS, n - 2))        # s
        return pts
    return rng.uniform(-2.0, 2.0, (N_POINTS, n))


def stan_version():
    import httpstan
    hpp = os.path.join(os.path.dirname(httpstan.__file__), "include", "stan", "version.hpp")
    text = open(hpp).read()
    parts = [re.search(rf"#define STAN_{k} (\d+)", text).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def fixture_text(fx):
    """JSON with one point / gradient per line; floats as Python repr (full precision)."""
    head = {k: fx[k] for k in ("model", "stan_file", "generator", "dim", "parameters")}
    lines = ["{" + json.dumps(head)[1:-1] + ","]
    lines.append(' "points": [')
    lines.append(",\n".join("  " + json.dumps(p) for p in fx["points"]))
    lines.append(' ],')
    lines.append(' "log_density": ' + json.dumps(fx["log_density"]) + ",")
    lines.append(' "gradient": [')
    lines.append(",\n".join("  " + json.dumps(g) for g in fx["gradient"]))
    lines.append(' ]}')
    return "\n".join(lines) + "\n"


def generate(models, data_path):
    import tempfile

    import stan  # pystan 3

    d = json.load(open(data_path))
    # httpstan's compiler leaves object files under ./build: keep them out of the repository.
    os.chdir(tempfile.mkdtemp(prefix="stan_parity_"))
    generator = f"scripts/stan_parity_fixtures.py (pystan {stan.__version__}, stan {stan_version()})"
    os.makedirs(OUT_DIR, exist_ok=True)
    for model in models:
        stan_file = os.path.join("bench", "stan", model + ".stan")
        code = open(os.path.join(ROOT, stan_file)).read()
        print(f"[{model}] building", flush=True)
        sm = stan.build(code, data=stan_data(model, d), random_seed=1)
        n = dim(model)
        names = [name for name, _, _ in PARAMS[model]]
        assert list(sm.param_names[:len(names)]) == names, (sm.param_names, names)
        pts = draw_points(model)
        lps, grads = [], []
        for x in pts:
            x = [float(v) for v in x]
            lp = float(sm.log_prob(x, adjust_transform=True))
            g = [float(v) for v in sm.grad_log_prob(x)]
            if not np.isfinite(lp) or len(g) != n or not np.all(np.isfinite(g)):
                raise RuntimeError(f"{model}: non-finite log density or bad gradient at {x}")
            lps.append(lp)
            grads.append(g)
        fx = {"model": model, "stan_file": stan_file, "generator": generator, "dim": n,
              "parameters": names, "points": [[float(v) for v in x] for x in pts],
              "log_density": lps, "gradient": grads}
        path = os.path.join(OUT_DIR, model + ".json")
        with open(path, "w") as f:
            f.write(fixture_text(fx))
        print(f"[{model}] wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)", flush=True)


# ---------------------------------------------------------------- independent check (--check)

def reference_logp(model, d):
    """Full log density (all constants) on the unconstrained scale, numpy/scipy only."""
    from scipy import stats

    def split(u):
        out, i = {}, 0
        for name, size, pos in PARAMS[model]:
            k = 1 if size is None else size
            v = u[i:i + k]
            jac = float(np.sum(v)) if pos else 0.0  # log |dx/du| of x = exp(u)
            v = np.exp(v) if pos else v
            out[name] = v[0] if size is None else v
            out["_jac"] = out.get("_jac", 0.0) + jac
            i += k
        return out

    norm = stats.norm.logpdf
    expo = lambda x, rate: stats.expon.logpdf(x, scale=1.0 / rate)

    if model == "simple":
        y = np.array(d["simple"]["y"])

        def f(u):
            p = split(u)
            return (p["_jac"] + norm(p["mu"], 0, 10) + expo(p["sigma"], 1)
                    + norm(y, p["mu"], p["sigma"]).sum())
    elif model == "medium":
        ya, yb = np.array(d["medium"]["y_a"]), np.array(d["medium"]["y_b"])

        def f(u):
            p = split(u)
            return (p["_jac"] + norm(p["mu_g"], 0, 10) + expo(p["sigma_g"], 1)
                    + norm(p["alpha"], p["mu_g"], p["sigma_g"]) + norm(p["beta"], p["mu_g"], p["sigma_g"])
                    + expo(p["sigma_obs"], 2)
                    + norm(ya, p["alpha"], p["sigma_obs"]).sum() + norm(yb, p["beta"], p["sigma_obs"]).sum())
    elif model == "stress":
        ys = [np.array(d["stress"][f"y_{j}"]) for j in (1, 2, 3)]

        def f(u):
            p = split(u)
            lp = p["_jac"] + norm(p["mu_pop"], 0, 10) + expo(p["sigma_pop"], 0.5)
            for j in (1, 2, 3):
                lp += norm(p[f"group_{j}"], p["mu_pop"], p["sigma_pop"]) + expo(p[f"noise_{j}"], 1)
                lp += norm(ys[j - 1], p[f"group_{j}"], p[f"noise_{j}"]).sum()
            return lp
    elif model in ("eight_schools", "eight_schools_noncentered"):
        y = np.array(d["eight_schools"]["y"], dtype=float)
        sig = np.array(d["eight_schools"]["sigma"], dtype=float)

        def f(u):
            p = split(u)
            lp = p["_jac"] + norm(p["mu"], 0, 5) + stats.halfnorm.logpdf(p["tau"], scale=5)
            if model == "eight_schools":
                theta = p["theta"]
                lp += norm(theta, p["mu"], p["tau"]).sum()
            else:
                theta = p["mu"] + p["tau"] * p["z"]
                lp += norm(p["z"], 0, 1).sum()
            return lp + norm(y, theta, sig).sum()
    elif model == "funnel":
        def f(u):
            p = split(u)
            return norm(p["y"], 0, 3) + norm(p["x"], 0, np.exp(p["y"] / 2)).sum()
    elif model == "logistic":
        X = np.array(d["logistic"]["X"])
        y = np.array(d["logistic"]["y"])

        def f(u):
            p = split(u)
            eta = p["alpha"] + X @ p["beta"]
            # log sigmoid(eta) for y=1, log sigmoid(-eta) for y=0, stably
            ll = -np.logaddexp(0.0, -np.where(y == 1, eta, -eta))
            return norm(p["alpha"], 0, 10) + norm(p["beta"], 0, 10).sum() + ll.sum()
    elif model == "sv":
        r = np.array(d["sv"]["returns"])

        def f(u):
            p = split(u)
            s, sg = p["s"], p["sigma"]
            return (p["_jac"] + expo(sg, 50) + expo(p["nu"], 0.1)
                    + norm(s[0], 0, sg) + norm(s[1:], s[:-1], sg).sum()
                    + stats.t.logpdf(r, p["nu"], loc=0, scale=np.exp(s)).sum())
    else:
        raise KeyError(model)
    return lambda u: float(f(np.asarray(u, dtype=float)))


def fd_gradient(f, x, h=1e-3):
    """4th-order central differences."""
    g = np.empty(len(x))
    for i in range(len(x)):
        e = np.zeros(len(x))
        e[i] = h
        g[i] = (-f(x + 2 * e) + 8 * f(x + e) - 8 * f(x - e) + f(x - 2 * e)) / (12 * h)
    return g


def check(models, data_path, lp_tol=1e-9, grad_tol=1e-6):
    d = json.load(open(data_path))
    ok = True
    print(f"{'model':27s} {'const':>16s} {'max|dlp-const|':>15s} {'max|dg|':>10s} {'max rel dg':>10s}  size")
    for model in models:
        path = os.path.join(OUT_DIR, model + ".json")
        fx = json.load(open(path))
        f = reference_logp(model, d)
        pts = np.array(fx["points"])
        assert fx["dim"] == dim(model) == pts.shape[1] and len(pts) == N_POINTS
        assert fx["parameters"] == [n for n, _, _ in PARAMS[model]]
        ours = np.array([f(x) for x in pts])
        delta = np.array(fx["log_density"]) - ours
        const = float(np.median(delta))
        dlp = float(np.max(np.abs(delta - const)))
        gs = np.array(fx["gradient"])
        gfd = np.array([fd_gradient(f, x) for x in pts])
        dg = float(np.max(np.abs(gs - gfd)))
        rel = float(np.max(np.abs(gs - gfd) / np.maximum(1.0, np.abs(gs))))
        bad = not (dlp <= lp_tol * max(1.0, float(np.max(np.abs(ours)))) and rel <= grad_tol)
        ok &= not bad
        print(f"{model:27s} {const:16.9f} {dlp:15.3e} {dg:10.3e} {rel:10.3e}  {os.path.getsize(path)} B"
              + ("  FAIL" if bad else ""))
    print("check", "passed" if ok else "FAILED")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=MODELS, help="subset of: " + " ".join(MODELS))
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--check", action="store_true", help="verify the fixture files (numpy + scipy)")
    a = ap.parse_args()
    for m in a.models:
        if m not in MODELS:
            ap.error(f"unknown model {m}")
    if a.check:
        sys.exit(0 if check(a.models, a.data) else 1)
    generate(a.models, a.data)


if __name__ == "__main__":
    main()
