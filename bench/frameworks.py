"""What the harness needs from a framework, and the registry of the five frameworks.

A framework adapter (``fw_<name>.py``) compiles one model, evaluates its log density and
gradient at unconstrained points (for the parity gate), warms up its just-in-time compiler and
runs one timed sampling job. The harness treats every framework alike through this interface.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class SampleRun:
    """One sampling job (``chains`` chains, ``NUM_WARMUP`` + ``NUM_DRAWS`` each), as exported.

    draws: parameter name -> post-warmup draws on the constrained scale, shape
        ``(chains, draws, *shape)``; parameters only (no deterministics).
    n_grad: ``(chains, draws)`` gradient evaluations of each post-warmup draw (the framework's
        leapfrog-step statistic: ``n_leapfrog__``, ``n_steps``, ``num_steps``).
    n_grad_warmup: the same for the warmup iterations, ``(chains, NUM_WARMUP)``.
    divergent: ``(chains, draws)`` post-warmup divergent transitions.
    wall_seconds: wall-clock time of warmup plus sampling, all chains, compilation excluded.
    native_sampling_seconds: the framework's own timing of the post-warmup phase of the whole
        job where it has one, else None: NumPyro's ``MCMC.run`` after ``MCMC.warmup`` (all
        chains at once); for per-chain clocks (Stan's and our ``Elapsed Time (Sampling)``,
        PyMC's callback stamps) ``parallel_seconds`` of them.
    """

    draws: dict[str, np.ndarray]
    n_grad: np.ndarray
    n_grad_warmup: np.ndarray
    divergent: np.ndarray
    wall_seconds: float
    native_sampling_seconds: float | None
    extra: dict = field(default_factory=dict)


@dataclass
class LogDensityValues:
    """Log density (Jacobian included) and its gradient at points of the unconstrained space."""

    log_density: np.ndarray
    gradient: np.ndarray | None


def parallel_seconds(per_chain: list[float]) -> float:
    """Sampling time of a job whose chains each report their own sampling time, run by a pool
    of one worker per core: their sum divided by the number of workers that ran at once."""
    workers = min(len(per_chain), os.cpu_count() or 1)
    return float(sum(per_chain)) / workers


class Framework(Protocol):
    name: str
    # How this framework's log density is evaluated for the parity gate ("" if it has none).
    parity_source: str

    def versions(self) -> dict[str, str]:
        """Versions of the packages (and binary) used."""

    def prepare(self, model: str) -> float:
        """Builds / compiles ``model``; returns the seconds it took (compile time)."""

    def log_density(self, points: np.ndarray) -> LogDensityValues | None:
        """Values at ``points`` (rows, our unconstrained order); None if not available."""

    def warm_up(self, chains: int) -> float:
        """Runs whatever must run once before timings are fair (JIT); returns its seconds."""

    def sample(self, chains: int, seed: int) -> SampleRun:
        """One timed sampling job."""


def load(name: str, **options) -> Framework:
    """The adapter of framework ``name`` (its module is imported only now: each framework
    runs in its own worker process and never loads the others' packages)."""
    module = importlib.import_module(f"fw_{name}")
    return module.Adapter(**options)
