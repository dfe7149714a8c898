#!/usr/bin/env python3
"""Writes the ill-conditioned regression data sets of models/stan/ (issue 25): linear
regressions that f32 on a GPU samples wrongly and f64 samples well.

    python3 scripts/make_ill_conditioned.py [OUTDIR]

regression_scale: uncentred predictors (x near 66) with coefficients near -6e4 and 1.3e3 and
a small noise (0.03): the linear predictor is 2e6 times the noise. regression_ridge: a
predictor offset far from zero relative to its spread (x near 1e4, sd 100), so that intercept
and slope are correlated at -0.99995, with a slope of 100 and noise 1: the linear predictor
is 1e6 times the noise. In f32 the linear predictor's rounding (a few 1e-3 of the noise per
observation) makes the log density's differences in the typical set wrong by more than 1. Python's own generator with fixed
seeds, so the files are reproducible without numpy.
"""

import json
import random
import sys
from pathlib import Path


def regression(seed, n, x_mean, x_sd, alpha, beta, sigma):
    rng = random.Random(seed)
    x = [round(rng.gauss(x_mean, x_sd), 6) for _ in range(n)]
    y = [round(alpha + beta * xi + rng.gauss(0.0, sigma), 6) for xi in x]
    return {"N": n, "x": x, "y": y}


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent.parent / "models" / "stan"
    sets = {
        "regression_scale": regression(25, 100, 66.0, 3.8, -6.0e4, 1300.0, 0.03),
        "regression_ridge": regression(26, 100, 1.0e4, 100.0, 3.0, 100.0, 1.0),
    }
    for name, data in sets.items():
        (out / f"{name}.data.json").write_text(json.dumps(data) + "\n")


if __name__ == "__main__":
    main()
