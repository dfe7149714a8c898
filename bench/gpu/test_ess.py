"""Check bench/gpu/ess.py against ArviZ 0.23 (needs ArviZ + SciPy, e.g. .venv-bench):

    .venv-bench/bin/python bench/gpu/test_ess.py [--timing]

Random data of several shapes (1, 4, 64 chains; odd and even draw counts; AR(1) draws with
different autocorrelations, heavy tails, discrete values with ties, a stuck chain, a constant
parameter); compares ``ess_bulk``/``ess_tail`` with ``arviz.ess(method="bulk"|"tail")`` per
parameter and fails above 1e-8 relative. ``--timing`` also times 8192 chains x 400 draws x 10
parameters.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ess  # noqa: E402

TOLERANCE = 1e-8


def ar1(rng, chains, draws, phi, params):
    x = np.empty((chains, draws, params))
    x[:, 0] = rng.standard_normal((chains, params))
    noise = rng.standard_normal((chains, draws, params)) * np.sqrt(1 - phi ** 2)
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


def datasets(rng):
    for chains in (1, 4, 64):
        for draws in (4, 5, 9, 100, 401):
            params = []
            for phi in (-0.6, 0.0, 0.5, 0.95, 0.999):
                params.append(ar1(rng, chains, draws, phi, 1))
            params.append(rng.standard_cauchy((chains, draws, 1)) * 1e3 + 1e6)  # heavy tails
            params.append(np.round(ar1(rng, chains, draws, 0.7, 1) * 2))  # ties
            params.append(np.full((chains, draws, 1), 3.25))  # constant parameter
            stuck = ar1(rng, chains, draws, 0.3, 1)
            stuck[0] = 1.5  # one constant chain
            params.append(stuck)
            drift = ar1(rng, chains, draws, 0.2, 1) + np.linspace(0, 3, draws)[None, :, None]
            params.append(drift)  # non-stationary
            binary = (rng.random((chains, draws, 1)) < 0.03).astype(float)  # rare event
            params.append(binary)
            yield f"{chains} chains x {draws} draws", np.concatenate(params, axis=2)
    # float32 input, many parameters (batching), as NumPyro hands them over
    yield "8 chains x 200 draws x 50 f32", ar1(rng, 8, 200, 0.8, 50).astype(np.float32)


def relative(a, b):
    a, b = np.atleast_1d(np.asarray(a, float)), np.atleast_1d(np.asarray(b, float))
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.abs(a - b) / np.maximum(np.abs(b), 1e-300)
    diff[both_nan] = 0.0
    diff[np.isnan(a) ^ np.isnan(b)] = np.inf
    return diff


def main() -> int:
    import logging
    import warnings

    warnings.simplefilter("ignore")
    import arviz as az

    logging.getLogger("arviz").setLevel(logging.ERROR)  # "Shape validation failed"
    from arviz.stats.diagnostics import _ess_bulk, _ess_tail

    rng = np.random.default_rng(20240601)
    worst = 0.0
    failed = False
    for name, draws in datasets(rng):
        bulk, tail = ess.ess_bulk_tail(draws)
        x64 = np.asarray(draws, dtype=np.float64)
        ref_bulk = np.array([_ess_bulk(x64[:, :, k]) for k in range(x64.shape[2])])
        ref_tail = np.array([_ess_tail(x64[:, :, k]) for k in range(x64.shape[2])])
        # the public entry point too, on the whole (chain, draw, param) array
        pub_bulk = az.ess(az.convert_to_dataset(draws), method="bulk")["x"].values
        pub_tail = az.ess(az.convert_to_dataset(draws), method="tail")["x"].values
        assert np.allclose(pub_bulk, ref_bulk, rtol=1e-12, equal_nan=True)
        assert np.allclose(pub_tail, ref_tail, rtol=1e-12, equal_nan=True)
        rb, rt = relative(bulk, ref_bulk), relative(tail, ref_tail)
        m = float(max(rb.max(), rt.max()))
        worst = max(worst, m)
        status = "ok" if m <= TOLERANCE else "FAIL"
        failed |= m > TOLERANCE
        print(f"{name:32s} max rel diff bulk {rb.max():.2e} tail {rt.max():.2e}  {status}")
        if m > TOLERANCE:
            print("  ours bulk", bulk, "\n  arviz    ", ref_bulk)
            print("  ours tail", tail, "\n  arviz    ", ref_tail)

    # separate entry points, 1-D input, NaN and too few draws
    x = ar1(rng, 4, 50, 0.5, 3)
    assert np.allclose(ess.ess_bulk(x), ess.ess_bulk_tail(x)[0], rtol=0, atol=0)
    assert np.allclose(ess.ess_tail(x), ess.ess_bulk_tail(x)[1], rtol=0, atol=0)
    one = x[0, :, 0]
    d = relative(ess.ess_bulk(one), _ess_bulk(one)).max()
    worst = max(worst, float(d))
    assert d <= TOLERANCE, d
    y = x.copy()
    y[1, 3, 1] = np.nan
    b, t = ess.ess_bulk_tail(y)
    assert np.isnan(b[1]) and np.isnan(t[1]) and not np.isnan(b[0]) and not np.isnan(t[2])
    assert np.isnan(ess.ess_bulk(x[:, :3])).all()

    print(f"max relative difference against ArviZ {az.__version__}: {worst:.3e}")
    if "--timing" in sys.argv:
        big = rng.standard_normal((8192, 400, 10))
        big[:, 1:] += 0.5 * big[:, :-1]
        started = time.perf_counter()
        bulk, tail = ess.ess_bulk_tail(big)
        elapsed = time.perf_counter() - started
        print(f"8192 chains x 400 draws x 10 parameters: {elapsed:.2f} s "
              f"(min bulk {bulk.min():.1f}, min tail {tail.min():.1f})")
        started = time.perf_counter()
        ref = [_ess_bulk(big[:, :, k]) for k in range(2)] + [_ess_tail(big[:, :, k])
                                                            for k in range(2)]
        arviz_s = (time.perf_counter() - started) * 5
        worst_big = max(relative(bulk[:2], ref[:2]).max(), relative(tail[:2], ref[2:]).max())
        print(f"  ArviZ on the same (2 of 10 parameters, scaled): ~{arviz_s:.1f} s; "
              f"max rel diff {worst_big:.2e}")
        failed |= worst_big > TOLERANCE
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
