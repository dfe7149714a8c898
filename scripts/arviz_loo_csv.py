#!/usr/bin/env python3
"""Reads the Stan CSV files of a directory with ArviZ's from_cmdstan, taking `log_lik` as the
pointwise log likelihood, and prints `n_obs elpd_loo p_loo` from az.loo. Used by
cluster-cli/tests/cli.rs (arviz_computes_loo_from_our_log_lik).

Usage: python3 scripts/arviz_loo_csv.py DIR   (needs arviz; tested with arviz 0.23.4)
"""
import glob
import os
import sys

import arviz as az


def main():
    files = sorted(glob.glob(os.path.join(sys.argv[1], "draws_*.csv")))
    if not files:
        sys.exit(f"no draws_*.csv in {sys.argv[1]}")
    idata = az.from_cmdstan(files, log_likelihood="log_lik")
    log_lik = idata.log_likelihood["log_lik"]
    assert log_lik.sizes["chain"] == len(files), log_lik
    assert "log_lik" not in idata.posterior, "log_lik should have moved to log_likelihood"
    loo = az.loo(idata, pointwise=True)
    n_obs = log_lik.size // (log_lik.sizes["chain"] * log_lik.sizes["draw"])
    print(n_obs, repr(float(loo["elpd_loo"])), repr(float(loo["p_loo"])))


if __name__ == "__main__":
    main()
