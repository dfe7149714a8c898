"""Min bulk ESS (ArviZ) of the columns in an npz file, for `vs_stan.py`: reads one path per
line on stdin, writes one JSON line per path on stdout. Each column is a (chains, draws) array.

The same estimator as `bench/metrics.py` (ArviZ `ess(method="bulk")`), run by a Python that has
ArviZ (PyStan's venv does not).
"""
import json
import sys

import arviz as az
import numpy as np

for line in sys.stdin:
    with np.load(line.strip()) as npz:
        worst, worst_name = np.inf, ""
        for name in npz.files:
            ess = float(az.ess(np.asarray(npz[name], dtype=float), method="bulk"))
            if np.isnan(ess):  # a column without an ESS is the worst
                worst, worst_name = ess, name
                break
            if ess < worst:
                worst, worst_name = ess, name
        print(json.dumps({"min_ess_bulk": worst, "worst": worst_name}), flush=True)
