#!/usr/bin/env python3
"""Models of growing size for the shader-size and compile-time study (issue 22, point 2).

The same models as `sampler::growing` (which `cluster-cli bench-compile` and the size test
use), as JSON IR files for reproductions with `cluster-cli sample`. Three families, each a
function of one size n, with data that are deterministic functions of the index:

* ``gp``: a Gaussian process on n points with the Cholesky factor of its squared-exponential
  kernel written out as scalar transformed values (K_ij, then L_ij by the Cholesky recurrence,
  then f_i = sum_j L_ij z_j): O(n^3) scalar instructions. The issue's model is n = 11.
* ``arma``: two n x n data matrices of powers multiplied by functions of two parameters, the
  closed-form ARMA(1,1) mean of the issue: mu = P1 exp(a j) + P2 (b j) + c, y ~ normal(mu, s).
  A handful of instructions over n x n products.
* ``chain``: a chain of n scalar transformed values x_k = x_{k-1} * a + sin-like terms, each
  used once: a program of about 3 n instructions.

Usage: gen_compile.py FAMILY N [OUT.json]  (prints the JSON when OUT is absent)
       gen_compile.py all DIR              (writes the sizes the journal's table uses)
"""

import json
import math
import sys

SIZES = {
    "gp": [3, 5, 7, 9, 11, 13],
    "arma": [5, 10, 20, 50, 100, 200],
    "chain": [10, 30, 100, 300, 1000],
}


def gp(n):
    x = [i * 5.0 / (n - 1) for i in range(n)]
    y = [math.sin(x[i]) + 0.1 * math.sin(7.3 * i + 1.0) for i in range(n)]
    data = {f"y{i}": {"real": y[i]} for i in range(n)}
    params = [
        {"name": "rho", "constraint": "positive"},
        {"name": "alpha", "constraint": "positive"},
        {"name": "sigma", "constraint": "positive"},
    ] + [{"name": f"z{i}"} for i in range(n)]
    transformed = []

    def t(name, value):
        transformed.append({"name": name, "value": value})

    for i in range(n):
        for j in range(i + 1):
            half_d2 = 0.5 * (x[i] - x[j]) ** 2
            k = {"mul": [{"pow": ["alpha", 2]},
                         {"exp": {"div": [-half_d2, {"pow": ["rho", 2]}]}}]}
            if i == j:
                k = {"add": [k, 0.01]}
            t(f"K{i}_{j}", k)
    for j in range(n):
        s = f"K{j}_{j}"
        for k in range(j):
            s = {"sub": [s, {"pow": [f"L{j}_{k}", 2]}]}
        t(f"L{j}_{j}", {"sqrt": s})
        for i in range(j + 1, n):
            s = f"K{i}_{j}"
            for k in range(j):
                s = {"sub": [s, {"mul": [f"L{i}_{k}", f"L{j}_{k}"]}]}
            t(f"L{i}_{j}", {"div": [s, f"L{j}_{j}"]})
    for i in range(n):
        f = {"mul": [f"L{i}_0", "z0"]}
        for j in range(1, i + 1):
            f = {"add": [f, {"mul": [f"L{i}_{j}", f"z{j}"]}]}
        t(f"f{i}", f)
    model = [
        {"sample": {"value": "rho", "dist": {"log_normal": {"mu": 0, "sigma": 1}}}},
        {"sample": {"value": "alpha", "dist": {"normal": {"mu": 0, "sigma": 2}}}},
        {"sample": {"value": "sigma", "dist": {"normal": {"mu": 0, "sigma": 1}}}},
    ]
    model += [{"sample": {"value": f"z{i}", "dist": {"normal": {"mu": 0, "sigma": 1}}}}
              for i in range(n)]
    model += [{"sample": {"value": f"y{i}", "dist": {"normal": {"mu": f"f{i}", "sigma": "sigma"}}}}
              for i in range(n)]
    return {"ir_version": 1, "name": f"gp{n}", "data": data, "parameters": params,
            "transformed": transformed, "model": model}


def arma(n):
    phi, theta = 0.6, 0.3
    # P1[t][k] = phi^(t-k) for k <= t, P2[t][k] = theta * phi^(t-k-1) for k < t: powers.
    p1 = [[phi ** (t - k) if k <= t else 0.0 for k in range(n)] for t in range(n)]
    p2 = [[theta * phi ** (t - k - 1) if k < t else 0.0 for k in range(n)] for t in range(n)]
    j = [k / n for k in range(n)]
    y = [0.0] * n
    for t in range(n):
        y[t] = 0.5 + (phi * y[t - 1] if t else 0.0) + math.sin(1.7 * t + 0.3)
    return {
        "ir_version": 1, "name": f"arma{n}",
        "data": {"P1": {"matrix": p1}, "P2": {"matrix": p2}, "j": {"vector": j},
                 "y": {"vector": y}},
        "parameters": [{"name": "a"}, {"name": "b"}, {"name": "c"},
                       {"name": "s", "constraint": "positive"}],
        "transformed": [{"name": "mu", "value": {"add": [
            {"add": [{"matvec": ["P1", {"exp": {"mul": ["a", "j"]}}]},
                     {"matvec": ["P2", {"mul": ["b", "j"]}]}]}, "c"]}}],
        "model": [
            {"sample": {"value": "a", "dist": {"normal": {"mu": 0, "sigma": 1}}}},
            {"sample": {"value": "b", "dist": {"normal": {"mu": 0, "sigma": 1}}}},
            {"sample": {"value": "c", "dist": {"normal": {"mu": 0, "sigma": 1}}}},
            {"sample": {"value": "s", "dist": {"exponential": {"rate": 1}}}},
            {"sample": {"value": "y", "dist": {"normal": {"mu": "mu", "sigma": "s"}}}},
        ],
    }


def chain(n):
    transformed = [{"name": "x0", "value": "a"}]
    for k in range(1, n):
        prev = f"x{k - 1}"
        transformed.append({"name": f"x{k}", "value": {
            "add": [{"mul": [prev, 0.9]}, {"mul": [0.1, {"logistic": {"add": [prev, "b"]}}]}]}})
    return {
        "ir_version": 1, "name": f"chain{n}",
        "data": {"y": {"real": 0.3}},
        "parameters": [{"name": "a"}, {"name": "b"}],
        "transformed": transformed,
        "model": [
            {"sample": {"value": "a", "dist": {"normal": {"mu": 0, "sigma": 1}}}},
            {"sample": {"value": "b", "dist": {"normal": {"mu": 0, "sigma": 1}}}},
            {"sample": {"value": "y", "dist": {"normal": {"mu": f"x{n - 1}", "sigma": 1}}}},
        ],
    }


FAMILIES = {"gp": gp, "arma": arma, "chain": chain}


def main(argv):
    if len(argv) == 3 and argv[1] == "all":
        for family, sizes in SIZES.items():
            for n in sizes:
                with open(f"{argv[2]}/{family}{n}.json", "w") as out:
                    json.dump(FAMILIES[family](n), out)
        return
    if len(argv) not in (3, 4) or argv[1] not in FAMILIES:
        sys.exit(__doc__)
    model = FAMILIES[argv[1]](int(argv[2]))
    if len(argv) == 4:
        with open(argv[3], "w") as out:
            json.dump(model, out)
    else:
        json.dump(model, sys.stdout)


if __name__ == "__main__":
    main(sys.argv)
