#!/usr/bin/env python3
"""Reads the Stan CSV files of a directory with ArviZ's from_cmdstan and prints, per scalar
quantity, `name mean ess_bulk ess_tail r_hat` (names in Stan's `z.1` form) for comparison with
our own diagnostics. Used by cluster-cli/tests/cli.rs (arviz_reads_our_stan_csv).

Usage: python3 scripts/arviz_check_csv.py DIR   (needs arviz; tested with arviz 0.23.4)
"""
import glob
import os
import sys

import arviz as az


def main():
    files = sorted(glob.glob(os.path.join(sys.argv[1], "draws_*.csv")))
    if not files:
        sys.exit(f"no draws_*.csv in {sys.argv[1]}")
    idata = az.from_cmdstan(files)
    summary = az.summary(idata, kind="all", round_to="none")
    assert idata.posterior.sizes["chain"] == len(files), idata.posterior
    for name, row in summary.iterrows():
        # ArviZ names vector elements z[0]; Stan CSV (and our header) says z.1.
        stan_name = name
        if "[" in name:
            base, index = name.rstrip("]").split("[")
            stan_name = f"{base}.{int(index) + 1}"
        print(stan_name, *(repr(float(row[key])) for key in ("mean", "ess_bulk", "ess_tail", "r_hat")))


if __name__ == "__main__":
    main()
