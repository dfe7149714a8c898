#!/usr/bin/env python3
"""Vendors posteriordb's reference posteriors into stan/tests/posteriordb/.

For every posterior that has reference draws, copies its Stan program (verbatim) and its data
(unzipped, verbatim), and writes one small summary of the reference draws:
reference/<posterior>.json with, per column, mean, sd, mcse_mean, mcse_sd.

Estimators (the same as `sampler::diagnostics`, which follows ArviZ 0.23, so that our MCSE
and the reference's are computed alike):
- mean, sd: over all draws pooled, sd with ddof = 1;
- mcse_mean: sd / sqrt(ESS_mean), ESS_mean the ESS of the split (not rank-normalised)
  chains with Geyer's initial monotone sequence (ArviZ `_mcse_mean`, posterior `mcse_mean`);
- mcse_sd: with c = (x - mean)^2, sqrt((mean(c^2) - mean(c)^2) / ESS_mean(c) / mean(c) / 4):
  Kenney and Keeping's variance of the variance and the delta method to the sd (ArviZ
  `_mcse_sd`, posterior's `mcse_sd`; Vehtari et al. 2021, doi:10.1214/20-BA1221).

Usage (needs numpy; the tests do not need this script):
    python3 bench/posteriordb/make_fixtures.py --git-dir PATH/TO/posteriordb/.git \
        --out stan/tests/posteriordb
PATH is a clone or bare mirror of https://github.com/stan-dev/posteriordb; files are read with
`git show HEAD:...`, so the commit named in NOTICE is the one at HEAD.
"""

import argparse
import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np

DB = "posterior_database"
DRAWS = f"{DB}/reference_posteriors/draws/draws"
DRAW_INFO = f"{DB}/reference_posteriors/draws/info"


def git(git_dir, *args):
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True
    ).stdout


def show(git_dir, path):
    return git(git_dir, "show", f"HEAD:{path}")


def unzip_one(blob):
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        names = archive.namelist()
        if len(names) != 1:
            sys.exit(f"expected one file in the zip, found {names}")
        return archive.read(names[0])


def autocov(chains):
    """Biased (1/n) autocovariance of each chain, by FFT (ArviZ `_autocov`)."""
    n = chains.shape[1]
    centred = chains - chains.mean(axis=1, keepdims=True)
    m = 2 * n
    spectrum = np.fft.rfft(centred, n=m, axis=1)
    spectrum *= np.conjugate(spectrum)
    return np.fft.irfft(spectrum, n=m, axis=1)[:, :n] / n


def ess(chains):
    """ESS of `chains` (chains x draws) as given, Geyer's initial monotone sequence (ArviZ `_ess`)."""
    n_chain, n_draw = chains.shape
    if np.max(chains) - np.min(chains) < np.finfo(float).resolution:
        return float(chains.size)
    acov = autocov(chains)
    chain_mean = chains.mean(axis=1)
    mean_var = np.mean(acov[:, 0]) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(chain_mean, ddof=1)
    rho = np.zeros(n_draw)
    rho_even = 1.0
    rho[0] = rho_even
    rho_odd = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    rho[1] = rho_odd
    t = 1
    while t < n_draw - 3 and rho_even + rho_odd > 0.0:
        rho_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if rho_even + rho_odd >= 0:
            rho[t + 1] = rho_even
            rho[t + 2] = rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0:
        rho[max_t + 1] = rho_even
    t = 1
    while t <= max_t - 2:
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = (rho[t - 1] + rho[t]) / 2.0
            rho[t + 2] = rho[t + 1]
        t += 2
    total = n_chain * n_draw
    tau = -1.0 + 2.0 * np.sum(rho[: max_t + 1]) + np.sum(rho[max_t + 1 : max_t + 2])
    tau = max(tau, 1.0 / np.log10(total))
    return total / tau


def split(chains):
    half = chains.shape[1] // 2
    return np.concatenate([chains[:, :half], chains[:, -half:]], axis=0)


def ess_mean(chains):
    return ess(split(chains))


def column_summary(name, chains):
    mean = float(chains.mean())
    sd = float(chains.std(ddof=1))
    mcse_mean = sd / np.sqrt(ess_mean(chains))
    c = (chains - mean) ** 2
    e_var = c.mean()
    var_var = ((c**2).mean() - e_var**2) / ess_mean(c)
    mcse_sd = float(np.sqrt(var_var / e_var / 4.0))
    return {
        "name": name,
        "mean": mean,
        "sd": sd,
        "mcse_mean": float(mcse_mean),
        "mcse_sd": mcse_sd,
    }


def from_summary_statistics(git_dir, posterior, n_draws):
    """Columns from posteriordb's own summaries, for a posterior whose draws are unavailable.

    sd = sqrt((E[x^2] - mean^2) * n / (n - 1)). The sd's MCSE needs the draws; without them
    it is bounded by the delta method on the variance E[x^2] - mean^2, dropping the
    covariance of the two estimates by Cauchy-Schwarz:
    mcse_sd <= (mcse(E[x^2]) + 2 |mean| mcse_mean) / (2 sd). A bound makes the check looser,
    never falsely strict.
    """
    stats = f"{DB}/reference_posteriors/summary_statistics"
    first = json.loads(show(git_dir, f"{stats}/mean_value/mean_value/{posterior}.json"))
    second = json.loads(
        show(git_dir, f"{stats}/mean_squared_value/mean_squared_value/{posterior}.json")
    )
    if first["names"] != second["names"]:
        sys.exit(f"{posterior}: the two summaries name different columns")
    columns = []
    for k, name in enumerate(first["names"]):
        mean, mcse_mean = first["mean_value"][k], first["mcse_mean"][k]
        square, mcse_square = second["mean_squared_value"][k], second["mcse_mean"][k]
        sd = float(np.sqrt((square - mean**2) * n_draws / (n_draws - 1)))
        mcse_sd = (mcse_square + 2.0 * abs(mean) * mcse_mean) / (2.0 * sd)
        columns.append(
            {"name": name, "mean": mean, "sd": sd, "mcse_mean": mcse_mean, "mcse_sd": mcse_sd}
        )
    return columns


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--git-dir", required=True, help="posteriordb clone's git directory")
    parser.add_argument("--out", required=True, help="stan/tests/posteriordb")
    args = parser.parse_args()
    commit = git(args.git_dir, "rev-parse", "HEAD").decode().strip()
    date = git(args.git_dir, "log", "-1", "--format=%cs", "HEAD").decode().strip()
    listing = git(args.git_dir, "ls-tree", "--name-only", "HEAD", f"{DRAWS}/").decode()
    posteriors = sorted(
        os.path.basename(path)[: -len(".json.zip")] for path in listing.split()
    )
    for sub in ("models", "data", "reference"):
        os.makedirs(os.path.join(args.out, sub), exist_ok=True)

    for posterior in posteriors:
        meta = json.loads(show(args.git_dir, f"{DB}/posteriors/{posterior}.json"))
        model, data = meta["model_name"], meta["data_name"]
        program = show(args.git_dir, f"{DB}/models/stan/{model}.stan")
        with open(os.path.join(args.out, "models", f"{model}.stan"), "wb") as f:
            f.write(program)
        data_json = unzip_one(show(args.git_dir, f"{DB}/data/data/{data}.json.zip"))
        with open(os.path.join(args.out, "data", f"{data}.json"), "wb") as f:
            f.write(data_json)

        info = json.loads(show(args.git_dir, f"{DRAW_INFO}/{posterior}.info.json"))
        arguments = info["inference"]["method_arguments"]
        control = arguments.get("control") or {}
        try:
            blob = show(args.git_dir, f"{DRAWS}/{posterior}.json.zip")
        except subprocess.CalledProcessError:
            blob = None
        if blob is not None:
            draws = json.loads(unzip_one(blob))
            names = list(draws[0].keys())
            columns = []
            for name in names:
                chains = np.array([chain[name] for chain in draws], dtype=float)
                columns.append(column_summary(name, chains))
            n_chains = len(draws)
            n_draws = n_chains * len(draws[0][names[0]])
            source = f"posteriordb {commit[:12]} {DRAWS}/{posterior}.json.zip"
        else:
            n_chains = info["diagnostics"]["nchains"]
            n_draws = info["diagnostics"]["ndraws"]
            columns = from_summary_statistics(args.git_dir, posterior, n_draws)
            source = (
                f"posteriordb {commit[:12]} summary_statistics of {posterior} (the draws are "
                "missing from the mirror used); mcse_sd is an upper bound"
            )
            print(f"{posterior}: draws missing, summary from summary_statistics")
        summary = {
            "posterior": posterior,
            "model": model,
            "data": data,
            "source": source,
            "ndraws": n_draws,
            "nchains": n_chains,
            "control": {
                "adapt_delta": control.get("adapt_delta", 0.8),
                "max_treedepth": control.get("max_treedepth", 10),
            },
            "params": columns,
        }
        with open(os.path.join(args.out, "reference", f"{posterior}.json"), "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
        print(f"{posterior}: {len(columns)} columns, {n_draws} draws in {n_chains} chains")

    with open(os.path.join(args.out, "LICENCE.md"), "wb") as f:
        f.write(show(args.git_dir, "LICENCE.md"))
    with open(os.path.join(args.out, "NOTICE"), "w") as f:
        f.write(
            f"""The files under models/ and data/ are copied from posteriordb
(https://github.com/stan-dev/posteriordb), commit {commit} ({date}):
models/<model>.stan from posterior_database/models/stan/<model>.stan, verbatim;
data/<data>.json from posterior_database/data/data/<data>.json.zip, unzipped, verbatim.
reference/<posterior>.json are summaries computed from
posterior_database/reference_posteriors/draws/draws/<posterior>.json.zip and its info file
by bench/posteriordb/make_fixtures.py.
posteriordb is distributed under the BSD 3-Clause licence in LICENCE.md
(Copyright (c) 2011-2024, Stan Developers and their Assignees); every model's info file
says "BSD3" and no data set names another licence.
"""
        )


if __name__ == "__main__":
    main()
