#!/usr/bin/env python3
"""Generate sampler/src/diagnostics/golden.json: draws plus ArviZ's convergence diagnostics.

The Rust module sampler/src/diagnostics.rs re-implements ArviZ's rank-normalised split R-hat,
bulk/tail/mean ESS, MCSE and E-BFMI (Vehtari et al. 2021, "Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2)).
Its unit tests (sampler/src/diagnostics/tests.rs) compare against the values this script writes.

How to run (from the repository root):

    python3 -m venv /tmp/azenv
    /tmp/azenv/bin/pip install arviz==0.23.4      # pulls numpy 2.4.x, scipy 1.17.x
    /tmp/azenv/bin/python scripts/diagnostics_golden.py

Versions used for the committed golden.json: arviz 0.23.4, numpy 2.4.6, scipy 1.17.1,
Python 3.11, numba NOT installed (with numba, ArviZ swaps np.var for a naive one-pass variance,
which moves results in the ~1e-13 relative range only). The versions actually used are recorded
in the file under "versions".

Draws are rounded to 6 decimals (some cases coarser, on purpose, to create ties) so the file
stays small; ArviZ's values are computed from exactly the rounded numbers that are written.
Floats are written with repr (shortest round-trip), NaN as null and infinities as the strings
"inf" / "-inf", because JSON has no non-finite numbers.
"""

import json
import math
import sys

import arviz
import numpy as np
import scipy
from scipy import stats

OUTPUT_PATH = "sampler/src/diagnostics/golden.json"
SEED = 20210131


def encode(value):
    """Make a float JSON-safe: NaN -> None, +-inf -> string."""
    value = float(value)
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def ar1(rng, n_chains, n_draws, phi, scale=1.0):
    """Stationary AR(1) chains x_t = phi x_{t-1} + sqrt(1 - phi^2) e_t (marginal sd = scale)."""
    draws = np.empty((n_chains, n_draws))
    draws[:, 0] = rng.standard_normal(n_chains)
    innovation_sd = math.sqrt(1.0 - phi * phi)
    for t in range(1, n_draws):
        draws[:, t] = phi * draws[:, t - 1] + innovation_sd * rng.standard_normal(n_chains)
    return scale * draws


def expected_values(chains):
    """Every quantity the Rust API exposes, as ArviZ / numpy compute it."""
    pooled = chains.ravel()
    return {
        "rhat": arviz.rhat(chains, method="rank"),
        # ArviZ's rank R-hat is max(z_scale R-hat, folded R-hat); both halves are public too.
        "rhat_bulk": arviz.rhat(chains, method="z_scale"),
        "rhat_tail": arviz.rhat(chains, method="folded"),
        "ess_bulk": arviz.ess(chains, method="bulk"),
        "ess_tail": arviz.ess(chains, method="tail"),
        "ess_mean": arviz.ess(chains, method="mean"),
        "mcse_mean": arviz.mcse(chains, method="mean"),
        "mcse_sd": arviz.mcse(chains, method="sd"),
        "mean": np.mean(pooled),
        "sd": np.std(pooled, ddof=1),
        "q5": np.quantile(pooled, 0.05),
        "q50": np.quantile(pooled, 0.5),
        "q95": np.quantile(pooled, 0.95),
    }


def summary_values(chains):
    """az.summary's own numbers (a separate code path in ArviZ: _multichain_statistics)."""
    table = arviz.summary(
        arviz.convert_to_dataset(chains[:, :, np.newaxis]),
        kind="diagnostics",
        round_to="none",
    )
    row = table.iloc[0]
    return {name: row[name] for name in ("mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat")}


def make_cases(rng):
    cases = []

    def add(name, chains, decimals=6):
        chains = np.round(np.asarray(chains, dtype=float), decimals)
        cases.append((name, chains))

    add("ar1_phi0_4x500", ar1(rng, 4, 500, 0.0))
    add("ar1_phi05_4x500", ar1(rng, 4, 500, 0.5))
    add("ar1_phi095_4x500", ar1(rng, 4, 500, 0.95, scale=3.0))
    add("student_t3_4x400", rng.standard_t(3, size=(4, 400)) * 2.0 + 10.0)
    # One decimal on a unit normal: heavy ties, including at the 5% and 95% quantiles.
    add("ties_rounded_4x300", ar1(rng, 4, 300, 0.3), decimals=1)
    # Integer-valued draws: ties everywhere (a discrete quantity such as a count).
    add("ties_poisson_3x200", rng.poisson(2.0, size=(3, 200)), decimals=0)
    shifted = ar1(rng, 4, 300, 0.2)
    shifted[3] += 1.5
    add("one_chain_shifted_4x300", shifted)
    # Odd length: split chains drop the middle draw.
    add("odd_draws_3x201", ar1(rng, 3, 201, 0.4) - 2.0)
    add("many_chains_64x40", ar1(rng, 64, 40, 0.6))
    add("one_chain_1x100", ar1(rng, 1, 100, 0.5))
    add("minimum_2x4", rng.standard_normal((2, 4)))
    add("minimum_odd_2x5", rng.standard_normal((2, 5)))
    # Chains of different location but tiny spread: R-hat far above 1, negative ESS terms.
    add("stuck_chains_4x50", rng.standard_normal((4, 50)) * 0.01 + np.arange(4)[:, None])
    # Antithetic chains: negative lag-1 autocorrelation, ESS above the number of draws.
    add("antithetic_4x200", ar1(rng, 4, 200, -0.6))
    # Values near 1e6 with unit spread: cancellation in centred sums.
    add("large_offset_4x200", ar1(rng, 4, 200, 0.5) + 1.0e6, decimals=4)
    # 88 draws whose 95% quantile falls inside a run of 1.8s: scipy's (1 - g) a + g a rounds to
    # 1.7999999999999998 there while numpy's lerp gives 1.8, so ArviZ's I[x <= q95] leaves the
    # tied draws out. Catches a tail ESS that uses numpy's interpolation instead of scipy's.
    # The high draws sit together in chain 0, so the 95% indicator is the less mixed one and its
    # ESS is the reported minimum.
    body = rng.permutation(np.clip(np.round(rng.standard_normal(82), 1), -1.7, 1.7))
    tied = np.concatenate([body[:6], [1.8, 2.5, 1.8, 2.6, 1.8, 1.8], body[6:]])
    add("ties_at_q95_4x22", tied.reshape(4, 22), decimals=1)
    add("constant_4x20", np.full((4, 20), 3.25))
    # Split draws are exactly half +1 and half -1, so the folded draws are all 1: the tail R-hat
    # is NaN while the bulk R-hat is not, and ArviZ's Python max() then returns the bulk value.
    symmetric = np.array([[1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0]] * 2)
    symmetric[1] = symmetric[1][::-1]
    add("symmetric_binary_2x8", symmetric)
    return cases


def main():
    rng = np.random.default_rng(SEED)
    cases_out = []
    for name, chains in make_cases(rng):
        case = {
            "name": name,
            "chains": [[float(x) for x in chain] for chain in chains],
            "expected": {key: encode(value) for key, value in expected_values(chains).items()},
        }
        # az.summary folds about the median of all draws, az.rhat about the median of the split
        # draws; they agree when the number of draws is even, so keep only those for the summary.
        if chains.shape[1] % 2 == 0 and chains.shape[0] >= 2:
            case["arviz_summary"] = {k: encode(v) for k, v in summary_values(chains).items()}
        cases_out.append(case)

    quantile_inputs = [
        [3.0, 1.0, 2.0],
        [5.5],
        [0.1, 0.1, 0.1, 0.7, -2.0, 0.1],
        list(np.round(rng.standard_normal(37), 6)),
    ]
    quantile_probs = [0.0, 0.05, 0.1, 0.25, 0.5, 0.7, 0.95, 0.999, 1.0]
    quantiles_out = [
        {
            "values": [float(x) for x in values],
            "q": quantile_probs,
            "expected": [encode(np.quantile(np.asarray(values), q)) for q in quantile_probs],
        }
        for values in quantile_inputs
    ]

    ppf_probs = [
        1e-300, 1e-100, 1e-20, 1e-10, 1e-5, 0.001, 0.01, 0.02425, 0.05, 0.0746, 0.1, 0.2,
        0.3, 0.375, 0.4, 0.425, 0.49, 0.5, 0.5000001, 0.51, 0.6, 0.75, 0.9, 0.925, 0.95,
        0.975, 0.99, 0.999, 0.999999, 1.0 - 1e-12, 0.0, 1.0,
    ]
    ppf_out = [[p, encode(stats.norm.ppf(p))] for p in ppf_probs]

    energy_out = []
    for phi, n_draws in ((0.0, 500), (0.9, 500), (-0.3, 257)):
        energy = np.round(ar1(rng, 1, n_draws, phi, scale=5.0)[0] + 40.0, 6)
        energy_out.append(
            {"energy": [float(x) for x in energy], "expected": encode(arviz.bfmi(energy)[0])}
        )

    golden = {
        "generator": "scripts/diagnostics_golden.py",
        "versions": {
            "arviz": arviz.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "python": sys.version.split()[0],
        },
        "seed": SEED,
        "cases": cases_out,
        "quantiles": quantiles_out,
        "inv_normal_cdf": ppf_out,
        "ebfmi": energy_out,
    }
    with open(OUTPUT_PATH, "w", encoding="utf-8") as handle:
        json.dump(golden, handle, separators=(",", ":"))
        handle.write("\n")
    print(f"wrote {OUTPUT_PATH}")


if __name__ == "__main__":
    main()
