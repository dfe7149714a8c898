#!/usr/bin/env python3
"""Writes the log-density parity fixtures `stan/tests/parity/<name>.json` from real Stan.

For each program in `stan/tests/parity/programs/` (with the data given below) this compiles
the program with Stan through PyStan 3, draws 5 points of the unconstrained space
(uniform(-1.5, 1.5), seeded by the program's name) and records at each point Stan's
`log_prob(theta, adjust_transform=True)`, its gradient, and the constrained parameters and
transformed parameters (`constrain_pars`). The Rust test `stan/tests/integration/parity.rs` reads the
fixtures; it does not need Python or Stan.

Setup (outside the repository; compiling a model needs g++ and takes about a minute):

    python3 -m venv /tmp/parity-venv && /tmp/parity-venv/bin/pip install pystan
    /tmp/parity-venv/bin/python bench/stan_parity/make_fixtures.py [--jobs 2] [NAME ...]

Stan's `log_prob` drops constant terms of `~` statements (propto), so only differences of
log densities between points are comparable; the test compares those.
"""

import argparse
import json
import multiprocessing
import pathlib
import zlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
PARITY = ROOT / "stan" / "tests" / "parity"
POINTS = 5
HALF_WIDTH = 1.5


def rng(seed):
    return np.random.default_rng(seed)


def rounded(values, digits=3):
    return [round(float(v), digits) for v in values]


def pos_def(k, seed):
    """A well-conditioned covariance matrix, as nested rows."""
    a = rng(seed).normal(size=(k, k))
    s = a @ a.T / k + np.eye(k)
    s = np.round(s, 3)
    s = (s + s.T) / 2
    return [rounded(row) for row in s]


def counts(n, seed, low, high):
    return [int(v) for v in rng(seed).integers(low, high + 1, size=n)]


def data_for(name):
    """The data of each program: small and fixed (numpy's PCG64 streams are stable)."""
    r = rng(zlib.crc32(name.encode()))
    x8 = rounded(r.normal(size=8))
    table = {
        "base_linear_regression": lambda: {
            "N": 8,
            "x": x8,
            "y": rounded(1.0 + 2.0 * np.array(x8) + r.normal(size=8)),
        },
        "c_lower": lambda: {"lb": -2.0},
        "c_upper": lambda: {"ub": 1.5},
        "c_lower_upper": lambda: {"lo": -1.0, "hi": 3.0},
        "c_vector_bounds": lambda: {
            "K": 3,
            "lb": [-1.0, 0.0, 2.0],
            "ub": [1.0, 0.5, 4.0],
        },
        "c_bound_expressions": dict,
        "c_offset_multiplier": lambda: {
            "J": 8,
            "y": [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0],
            "sigma": [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0],
        },
        "c_ordered": dict,
        "c_positive_ordered": dict,
        "c_simplex": dict,
        "c_unit_vector": lambda: {"m": [0.5, -1.0, 2.0]},
        "c_cholesky_factor_corr": lambda: {"eta": 2.0},
        "c_cholesky_factor_cov": dict,
        "c_corr_matrix": lambda: {"eta": 1.5},
        "c_cov_matrix": lambda: {"nu": 5.0, "S": pos_def(3, 1)},
        "c_containers": dict,
        "d_normal": lambda: {"N": 5, "y": rounded(r.normal(1, 2, size=5)), "z": 0.7},
        "d_normal_id_glm": lambda: {
            "N": 6,
            "K": 2,
            "X": [rounded(row) for row in r.normal(size=(6, 2))],
            "y": rounded(r.normal(size=6)),
        },
        "d_student_t_cauchy": lambda: {"N": 6, "y": rounded(r.standard_t(3, size=6))},
        "d_double_exponential_logistic": lambda: {"N": 6, "y": rounded(r.laplace(size=6))},
        "d_lognormal_chi_square": lambda: {"N": 5, "y": rounded(r.lognormal(size=5))},
        "d_gamma_inv_gamma": lambda: {"N": 5, "y": rounded(r.gamma(2.0, size=5))},
        "d_std_normal_inv_chi_square": lambda: {"N": 5, "y": rounded(1 / r.chisquare(4.0, size=5))},
        "d_weibull_exponential": lambda: {"N": 5, "y": rounded(r.weibull(1.5, size=5))},
        "d_beta_uniform": lambda: {
            "N": 5,
            "y": rounded(r.beta(2, 3, size=5)),
            "u": rounded(r.uniform(-1, 1, size=5)),
        },
        "d_bernoulli": lambda: {"N": 8, "y": counts(8, 2, 0, 1), "x": x8},
        "d_binomial": lambda: {
            "N": 6,
            "n": [10, 12, 5, 8, 20, 3],
            "k": [3, 7, 1, 4, 11, 3],
            "x": x8[:6],
        },
        "d_poisson": lambda: {"N": 8, "y": counts(8, 3, 0, 9), "x": x8},
        "d_neg_binomial_2": lambda: {"N": 8, "y": counts(8, 4, 0, 12), "x": x8},
        "d_categorical": lambda: {"N": 8, "K": 3, "y": counts(8, 5, 1, 3)},
        "d_ordered_logistic": lambda: {"N": 8, "K": 4, "y": counts(8, 6, 1, 4), "x": x8},
        "d_multi_normal": lambda: {
            "N": 4,
            "y": [rounded(row) for row in r.normal(size=(4, 3))],
            "Sigma": pos_def(3, 7),
        },
        "d_dirichlet": lambda: {"alpha": [1.5, 2.0, 0.7, 3.0]},
        "f_log_sum_exp_log_mix": lambda: {
            "N": 8,
            "y": rounded(np.concatenate([r.normal(-1, 1, 4), r.normal(2, 1, 4)])),
        },
        "f_softmax_cumulative_sum": lambda: {
            "w": [3.0, 1.0, 2.0, 0.5],
            "x": [0.5, 1.5, 3.0, 4.5],
        },
        "f_scalar_functions": lambda: {"y": 0.3},
        "f_cholesky_decompose": lambda: {
            "N": 5,
            "x": [-2.0, -1.0, 0.0, 1.5, 3.0],
            "y": rounded(r.normal(size=5)),
        },
        "f_matrix_functions": lambda: {
            "X": [rounded(row) for row in r.normal(size=(3, 2))],
            "v": [0.5, -1.0],
        },
        "f_mdivide_left_tri_low": lambda: {"b": [1.0, -0.5, 2.0], "S": pos_def(3, 9)},
        "f_matrix_solves": lambda: {"b": [0.5, -1.0, 1.5], "S": pos_def(3, 4)},
        "s_arma11": lambda: {"T": 10, "y": rounded(r.normal(size=10))},
        "s_garch11": lambda: {"T": 10, "r": rounded(r.normal(size=10)), "sigma1": 0.8},
        "s_ark": lambda: {"K": 2, "T": 10, "y": rounded(r.normal(size=10))},
        "s_transformed_parameters": lambda: {
            "J": 8,
            "y": [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0],
            "sigma": [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0],
        },
        "u_user_functions": lambda: {
            "N": 5,
            "y": rounded(r.normal(size=5)),
            "xs": [-1.0, -0.5, 0.25, 2.0, -3.0],
            "pts": [rounded(row) for row in r.normal(size=(3, 2))],
        },
        "t_truncation": lambda: {
            "N": 5,
            "y": [0.3, 1.1, 2.5, 0.8, 1.7],
            "n": [2, 0, 5, 3, 1],
            "k": [1, 3, 5, 0, 2],
        },
        "f_normal_cdfs": dict,
        # posteriordb's accel_gp (brms's approximate GPs in user functions) on its own data.
        "u_accel_gp": lambda: json.loads(
            (ROOT / "stan" / "tests" / "posteriordb" / "data" / "mcycle_gp.json").read_text()
        ),
        "s_control_flow": lambda: {"N": 8, "x": x8, "y": rounded(r.normal(size=8)), "prior_only": 0},
        "s_hmm_forward": lambda: {
            "N": 6,
            "K": 2,
            "y": [1.2, 0.8, 3.9, 4.2, 1.1, 3.7],
        },
    }
    return table[name]()


def unconstrained_dim(model):
    """PyStan does not report it; the first length `log_prob` accepts is it."""
    for dim in range(0, 400):
        try:
            model.log_prob([0.1] * dim)
            return dim
        except RuntimeError:
            continue
    raise RuntimeError("no unconstrained length up to 400 accepted")


def versions():
    import httpstan
    import stan

    include = pathlib.Path(httpstan.__file__).parent / "include" / "stan"

    def version(path, prefix):
        text = path.read_text()
        parts = []
        for part in ("MAJOR", "MINOR", "PATCH"):
            line = next(l for l in text.splitlines() if l.startswith(f"#define {prefix}_{part} "))
            parts.append(line.split()[-1])
        return ".".join(parts)

    return {
        "stan": version(include / "version.hpp", "STAN"),
        "stan_math": version(include / "math" / "version.hpp", "STAN_MATH"),
        "interface": f"pystan {stan.__version__}, httpstan {httpstan.__version__}",
    }


def make(name):
    try:
        return make_one(name)
    except Exception:  # report and go on with the other programs
        import traceback

        return f"{name} FAILED: {traceback.format_exc()}"


def patch_pystan():
    """Builds take minutes on a loaded machine: no client timeout (aiohttp's default is 5
    minutes, after which PyStan reports an empty error), and compile without optimisation or
    debug information, which is much faster and gives the same IEEE arithmetic."""
    import aiohttp.client
    import httpstan.models

    aiohttp.client.DEFAULT_TIMEOUT = aiohttp.ClientTimeout(total=None)
    build = httpstan.models.build_services_extension_module

    async def quick_build(program_code, extra_compile_args=None):
        flags = extra_compile_args or ["-O0", "-g0", "-std=c++14", "-Wno-sign-compare"]
        return await build(program_code, flags)

    httpstan.models.build_services_extension_module = quick_build


def make_one(name):
    import stan

    patch_pystan()

    program_file = f"programs/{name}.stan"
    code = (PARITY / program_file).read_text()
    data = data_for(name)
    model = stan.build(code, data=data, random_seed=1)
    dim = unconstrained_dim(model)
    names = list(model.constrained_param_names)
    generator = rng(zlib.crc32(name.encode()) + 1)
    points = []
    for _ in range(POINTS):
        theta = [float(v) for v in generator.uniform(-HALF_WIDTH, HALF_WIDTH, size=dim)]
        lp = model.log_prob(theta, adjust_transform=True)
        grad = model.grad_log_prob(theta)
        constrained = model.constrain_pars(theta, include_tparams=True, include_gqs=False)
        points.append({"theta": theta, "lp": lp, "grad": list(grad), "constrained": list(constrained)})
    fixture = {
        "name": name,
        "versions": versions(),
        "program_file": program_file,
        "program": code,
        "data": data,
        "unconstrained_dim": dim,
        "constrained_names": names[: len(points[0]["constrained"])],
        "points": points,
    }
    out = PARITY / f"{name}.json"
    out.write_text(json.dumps(fixture, indent=1) + "\n")
    return f"wrote {name}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="programs to redo (default: all)")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    names = args.names or sorted(p.stem for p in (PARITY / "programs").glob("*.stan"))
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for done in pool.imap_unordered(make, names):
            print(done, flush=True)


if __name__ == "__main__":
    main()
