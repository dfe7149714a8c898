"""The parity gate: a framework's log density must equal ours up to one constant per model.

Points and reference values: ``sampler/tests/fixtures/stan_parity/<model>.json`` (20 random
unconstrained points; Stan's log density and gradient there equal our evaluator's up to a
constant, which the Rust test ``stan_parity`` checks). A framework passes when, at every point,
its log density minus the reference is the same constant (relative tolerance ``LP_TOL``) and,
where it gives gradients, they equal the reference gradient (relative tolerance ``GRAD_TOL``).

A passing framework's values are saved to ``bench/fixtures/parity/<framework>/<model>.json``,
which the Rust test ``bench_parity`` checks against our evaluator in CI, without Python.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

import numpy as np

from common import PARITY_FIXTURE_DIR, STAN_PARITY_DIR, rel, stan_fixture
from frameworks import Framework

LP_TOL = 1e-8
GRAD_TOL = 1e-7


@dataclass
class GateResult:
    framework: str
    model: str
    passed: bool
    source: str
    constant: float | None = None
    max_lp_deviation: float | None = None  # max |(theirs - ref) - constant|
    max_grad_deviation: float | None = None  # max |g_theirs - g_ref| / max(1, |g_ref|)
    message: str = ""


def check(framework: Framework, model: str) -> GateResult:
    """Evaluates ``framework`` at the fixture points of ``model`` and compares."""
    if not framework.parity_source:
        return GateResult(framework.name, model, True, "",
                          message="checked by the Rust tests stan_parity and bench_parity")
    ref = stan_fixture(model)
    values = framework.log_density(ref.points)
    lp = np.asarray(values.log_density, dtype=float)
    result = GateResult(framework.name, model, False, framework.parity_source)
    if lp.shape != ref.log_density.shape or not np.all(np.isfinite(lp)):
        result.message = f"log density not finite or of shape {lp.shape}"
        return result
    delta = lp - ref.log_density
    result.constant = float(np.median(delta))
    deviation = np.abs(delta - result.constant)
    scale = 1.0 + np.abs(ref.log_density)
    result.max_lp_deviation = float(deviation.max())
    lp_ok = bool(np.all(deviation <= LP_TOL * scale))
    grad_ok = True
    if values.gradient is not None:
        g = np.asarray(values.gradient, dtype=float)
        if g.shape != ref.gradient.shape:
            result.message = f"gradient of shape {g.shape}, expected {ref.gradient.shape}"
            return result
        rel_dev = np.abs(g - ref.gradient) / np.maximum(1.0, np.abs(ref.gradient))
        result.max_grad_deviation = float(rel_dev.max())
        grad_ok = bool(np.all(rel_dev <= GRAD_TOL))
    result.passed = lp_ok and grad_ok
    if not result.passed:
        worst = int(np.argmax(deviation / scale))
        result.message = (f"log density differs from ours by {delta[worst]:.12g} at point "
                          f"{worst}, by {result.constant:.12g} at the median point"
                          + ("" if grad_ok else f"; gradient off by {result.max_grad_deviation:.3g}"))
        return result
    write_fixture(framework, model, lp, values.gradient)
    return result


def write_fixture(framework: Framework, model: str, lp: np.ndarray, gradient) -> str:
    """``bench/fixtures/parity/<framework>/<model>.json``; one point per line."""
    out_dir = os.path.join(PARITY_FIXTURE_DIR, framework.name)
    os.makedirs(out_dir, exist_ok=True)
    head = {
        "framework": framework.name,
        "model": model,
        "generator": "bench/run.py (" + ", ".join(
            f"{k} {v}" for k, v in framework.versions().items()) + ")",
        "source": framework.parity_source,
        "points_file": rel(os.path.join(STAN_PARITY_DIR, model + ".json")),
    }
    lines = ["{" + json.dumps(head)[1:-1] + ","]
    lines.append(' "log_density": ' + json.dumps([float(v) for v in lp])
                 + ("," if gradient is not None else ""))
    if gradient is not None:
        lines.append(' "gradient": [')
        lines.append(",\n".join("  " + json.dumps([float(v) for v in g]) for g in gradient))
        lines.append(" ]")
    lines.append("}")
    path = os.path.join(out_dir, model + ".json")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def as_record(result: GateResult) -> dict:
    return asdict(result)
