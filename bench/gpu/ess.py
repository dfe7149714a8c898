"""Rank-normalised bulk and tail ESS (Vehtari et al. 2021), a NumPy-only port of ArviZ 0.23.

Reproduces ``arviz.ess(method="bulk")`` and ``arviz.ess(method="tail")`` (ArviZ 0.23,
``arviz/stats/diagnostics.py``: ``_ess_bulk``, ``_ess_tail``, ``_ess_quantile``, ``_ess``,
``_z_scale``, ``_split_chains``, ``_backtransform_ranks``; ``stats_utils.autocov`` and
``quantile``) without ArviZ, SciPy or xarray, vectorised over parameters:

* split every chain into its first and last ``draws // 2`` draws (the middle draw of an odd
  count is dropped), stacked as ``2 * chains`` chains;
* bulk: average ("fractional") ranks over all split draws, ``z = Phi^-1((r - 3/8) / (S + 1/4))``
  (``S`` the number of split draws; ``Phi^-1`` a port of Cephes' ``ndtri``, SciPy's
  ``norm.ppf``), then the ESS of ``z``;
* tail: the smaller ESS of the indicators ``x <= q`` for ``q`` the 5% and 95% quantiles of all
  (unsplit) draws, by R's type 7 as ``scipy.stats.mstats.mquantiles(alphap=1, betap=1)``;
* ESS of a (chains, n) array: autocovariances by FFT (zero-padded to ``next_fast_len(2n)``),
  ``var_plus`` with the between-chain variance, Geyer's initial positive sequence with the
  monotone step, ``tau_hat >= 1 / log10(chains * n)``; an array whose range is below
  ``finfo(float).resolution`` has ESS ``chains * n`` (so a constant parameter gets
  ``2 * chains * (draws // 2)``); NaN draws or fewer than 4 draws give NaN.

The one deliberate difference in arithmetic: the chain-averaged autocovariance is computed as
the inverse FFT of the chain-averaged power spectrum (equal by linearity, one inverse FFT per
parameter instead of one per chain); results agree with ArviZ to ~1e-13 relative
(``bench/gpu/test_ess.py``).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["ess_bulk", "ess_tail", "ess_bulk_tail", "ndtri", "ESS_METHOD"]

ESS_METHOD = "rank-normalised bulk/tail (numpy port of ArviZ 0.23)"
TAIL_PROBABILITIES = (0.05, 0.95)
# Values per batch of parameters (float64 elements of the input); bounds peak memory at
# roughly 12x this many bytes (~1.5 GB) and keeps one 65536 x 400 parameter per batch.
BATCH_ELEMENTS = 1 << 24
# Batches run on up to this many threads (and at most half the CPU count).
MAX_THREADS = 8

# ---------------------------------------------------------------------------------------------
# Normal quantile: Cephes ndtri (Moshier), the function behind scipy.special.ndtri / norm.ppf.

_S2PI = 2.50662827463100050242e0
_EXP_M2 = 0.13533528323661269189  # exp(-2)
_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
       1.39312609387279679503e1, -1.23916583867381258016e0)
_Q0 = (1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
       -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
       1.59056225126211695515e1, -1.18331621121330003142e0)
_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
       4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
       -1.40256079171354495875e-1, -3.50424626827848203418e-2, -8.57456785154685413611e-4)
_Q1 = (1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
       1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
       -3.80806407691578277194e-2, -9.33259480895457427372e-4)
_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
       1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
       3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)
_Q2 = (6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
       2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
       2.89247864745380683936e-6, 6.79019408009981274425e-9)


def _polevl(x, coefficients):
    result = np.full_like(x, coefficients[0])
    for c in coefficients[1:]:
        result = result * x + c
    return result


def _p1evl(x, coefficients):  # leading coefficient 1
    result = x + coefficients[0]
    for c in coefficients[1:]:
        result = result * x + c
    return result


def ndtri(p) -> np.ndarray:
    """Inverse of the standard normal CDF, elementwise (Cephes' algorithm; -inf/inf/nan at
    p <= 0, p >= 1 and NaN)."""
    p = np.asarray(p, dtype=np.float64)
    out = np.empty_like(p)
    flip = p > 1.0 - _EXP_M2
    y = np.where(flip, 1.0 - p, p)
    central = (y > _EXP_M2) & (p < 1.0)
    if central.any():
        w = y[central] - 0.5
        w2 = w * w
        out[central] = (w + w * (w2 * _polevl(w2, _P0) / _p1evl(w2, _Q0))) * _S2PI
    tail = ~central & (p > 0.0) & (p < 1.0)
    if tail.any():
        x = np.sqrt(-2.0 * np.log(y[tail]))
        x0 = x - np.log(x) / x
        z = 1.0 / x
        near = x < 8.0
        x1 = np.where(near, z * _polevl(z, _P1) / _p1evl(z, _Q1),
                      z * _polevl(z, _P2) / _p1evl(z, _Q2))
        value = x0 - x1
        out[tail] = np.where(flip[tail], value, -value)
    out[p <= 0.0] = -np.inf
    out[p >= 1.0] = np.inf
    out[np.isnan(p)] = np.nan
    return out


# ---------------------------------------------------------------------------------------------


def next_fast_len(target: int) -> int:
    """Smallest 5-smooth integer >= target (scipy.fftpack.next_fast_len, which ArviZ uses)."""
    if target <= 6:
        return max(int(target), 1)
    best = None
    p5 = 1
    while p5 < 2 * target:
        p35 = p5
        while p35 < 2 * target:
            n = p35
            while n < target:
                n *= 2
            if best is None or n < best:
                best = n
            p35 *= 3
        p5 *= 5
    return best


_Z_CACHE: dict[int, np.ndarray] = {}


def _z_lattice(size: int) -> np.ndarray:
    """ndtri((r - 3/8) / (size + 1/4)) for the tie-free ranks r = 1..size."""
    z = _Z_CACHE.get(size)
    if z is None:
        ranks = np.arange(1, size + 1, dtype=np.float64)
        z = ndtri((ranks - 3 / 8) / (size - 2 * (3 / 8) + 1))
        if len(_Z_CACHE) > 8:
            _Z_CACHE.clear()
        _Z_CACHE[size] = z
    return z


def _z_scale(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ArviZ's _z_scale of each row (flattened): normal scores of the average ranks; also
    returns the sorted rows."""
    n_rows, size = rows.shape
    order = np.argsort(rows, axis=1)
    z = np.empty_like(rows)
    ordered = np.empty_like(rows)
    lattice = _z_lattice(size)
    for i in range(n_rows):
        row_order, row_sorted, row_z = order[i], ordered[i], z[i]
        np.take(rows[i], row_order, out=row_sorted)
        ties = row_sorted[1:] == row_sorted[:-1]
        if not ties.any():
            row_z[row_order] = lattice
            continue
        # average ranks of tied groups, as scipy.stats.rankdata(method="average")
        starts = np.flatnonzero(np.concatenate(([True], ~ties)))
        counts = np.diff(np.append(starts, size))
        ranks = np.repeat(starts + 1 + (counts - 1) / 2.0, counts)
        row_z[row_order] = ndtri((ranks - 3 / 8) / (size - 2 * (3 / 8) + 1))
    return z, ordered


def _split(batch: np.ndarray) -> np.ndarray:
    """(B, chains, draws) -> (B, 2 chains, draws // 2): first halves, then last halves."""
    half = batch.shape[2] // 2
    return np.concatenate((batch[:, :, :half], batch[:, :, batch.shape[2] - half:]), axis=1)


def _geyer(rho: np.ndarray, n_draw: int) -> tuple[float, bool]:
    """ArviZ's initial positive + monotone sequence on the lag autocorrelations ``rho`` (rho[t]
    for t = 0..n_draw-1 as 1 - (mean_var - mean acov_t) / var_plus); returns (tau_hat before
    the lower bound, whether a used value is NaN)."""
    rho = rho.tolist()
    rho_hat_t = [0.0] * n_draw
    rho_hat_even = 1.0
    rho_hat_t[0] = rho_hat_even
    rho_hat_odd = rho[1]
    rho_hat_t[1] = rho_hat_odd
    t = 1
    while t < (n_draw - 3) and (rho_hat_even + rho_hat_odd) > 0.0:
        rho_hat_even = rho[t + 1]
        rho_hat_odd = rho[t + 2]
        if (rho_hat_even + rho_hat_odd) >= 0:
            rho_hat_t[t + 1] = rho_hat_even
            rho_hat_t[t + 2] = rho_hat_odd
        t += 2
    max_t = t - 2
    if rho_hat_even > 0:
        rho_hat_t[max_t + 1] = rho_hat_even
    t = 1
    while t <= max_t - 2:
        if (rho_hat_t[t + 1] + rho_hat_t[t + 2]) > (rho_hat_t[t - 1] + rho_hat_t[t]):
            rho_hat_t[t + 1] = (rho_hat_t[t - 1] + rho_hat_t[t]) / 2.0
            rho_hat_t[t + 2] = rho_hat_t[t + 1]
        t += 2
    arr = np.asarray(rho_hat_t)
    tau_hat = -1.0 + 2.0 * np.sum(arr[: max_t + 1]) + np.sum(arr[max_t + 1: max_t + 2])
    return float(tau_hat), bool(np.isnan(arr).any())


def _ess(batch: np.ndarray) -> np.ndarray:
    """ArviZ's _ess of each (chains, n) slice of a (B, chains, n) float64 array."""
    n_rows, n_chain, n_draw = batch.shape
    out = np.empty(n_rows)
    flat = batch.reshape(n_rows, -1)
    spread = flat.max(axis=1) - flat.min(axis=1)  # NaN where a value is NaN
    constant = spread < np.finfo(float).resolution
    nan = np.isnan(spread)
    out[constant] = n_chain * n_draw
    out[nan] = np.nan
    todo = np.flatnonzero(~constant & ~nan)
    if todo.size == 0:
        return out
    x = batch if todo.size == n_rows else batch[todo]
    chain_mean = x.mean(axis=2)
    m = next_fast_len(2 * n_draw)
    spectrum = np.fft.rfft(x - chain_mean[:, :, None], n=m, axis=2)
    # mean over chains of autocov = irfft of the mean power spectrum (linearity)
    power = np.einsum("bkf,bkf->bf", spectrum.real, spectrum.real)
    power += np.einsum("bkf,bkf->bf", spectrum.imag, spectrum.imag)
    del spectrum
    acov = np.fft.irfft(power / n_chain, n=m, axis=1)[:, :n_draw] / n_draw
    mean_var = acov[:, 0] * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus = var_plus + np.var(chain_mean, axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[:, None] - acov) / var_plus[:, None]
    rho[:, 0] = 1.0
    size = n_chain * n_draw
    for j, row in enumerate(todo):
        tau_hat, has_nan = _geyer(rho[j], n_draw)
        tau_hat = max(tau_hat, 1 / np.log10(size))
        out[row] = np.nan if has_nan else size / tau_hat
    return out


def _quantile_type7(rows: np.ndarray, prob: float) -> np.ndarray:
    """mquantiles(row, prob, alphap=1, betap=1) of each flattened row."""
    n = rows.shape[1]
    if n == 1:
        return rows[:, 0].copy()
    m = 1.0 + prob * (1.0 - 1.0 - 1.0)
    aleph = n * prob + m
    k = int(np.floor(min(max(aleph, 1), n - 1)))
    gamma = min(max(aleph - k, 0.0), 1.0)
    part = np.partition(rows, (k - 1, k), axis=1)
    return (1.0 - gamma) * part[:, k - 1] + gamma * part[:, k]


def _batches(draws: np.ndarray, workers: int):
    """Yield (index, (B, chains, draws) float64 array) over the trailing parameter axis."""
    n_chain, n_draw, n_param = draws.shape
    step = max(1, min(BATCH_ELEMENTS // max(1, n_chain * n_draw), -(-n_param // workers)))
    for start in range(0, n_param, step):
        stop = min(n_param, start + step)
        batch = np.ascontiguousarray(np.moveaxis(draws[:, :, start:stop], 2, 0), dtype=np.float64)
        yield slice(start, stop), batch


def _as_3d(draws) -> tuple[np.ndarray, tuple]:
    draws = np.asarray(draws)
    if draws.ndim == 1:
        draws = draws[None, :]
    if draws.ndim < 2:
        raise ValueError("draws must be shaped (chains, draws, *parameter_shape)")
    shape = draws.shape[2:]
    return draws.reshape(draws.shape[0], draws.shape[1], -1), shape


def _quantile_sorted(ordered: np.ndarray, prob: float) -> np.ndarray:
    """_quantile_type7 of rows already sorted."""
    n = ordered.shape[1]
    if n == 1:
        return ordered[:, 0].copy()
    aleph = n * prob + (1.0 + prob * (1.0 - 1.0 - 1.0))
    k = int(np.floor(min(max(aleph, 1), n - 1)))
    gamma = min(max(aleph - k, 0.0), 1.0)
    return (1.0 - gamma) * ordered[:, k - 1] + gamma * ordered[:, k]


def _batch_ess(batch: np.ndarray, which, prob=TAIL_PROBABILITIES) -> dict:
    """{"bulk": ..., "tail": ...} of a (B, chains, draws) float64 batch."""
    out = {}
    split = _split(batch)
    ordered = None
    if "bulk" in which:
        z, ordered = _z_scale(split.reshape(split.shape[0], -1))
        out["bulk"] = _ess(z.reshape(split.shape))
        del z
    if "tail" in which:
        result = None
        for p in prob:
            if ordered is not None and batch.shape[2] % 2 == 0:
                q = _quantile_sorted(ordered, p)  # the split draws are all the draws
            else:
                q = _quantile_type7(batch.reshape(batch.shape[0], -1), p)
            # the split of the indicators is the indicator of the split draws
            value = _ess((split <= q[:, None, None]).astype(np.float64))
            result = value if result is None else np.minimum(result, value)
        out["tail"] = result
    return out


def _run(draws, which: tuple[str, ...]):
    draws, shape = _as_3d(draws)
    n_chain, n_draw, n_param = draws.shape
    outputs = {name: np.full(n_param, np.nan) for name in which}
    if n_draw < 4 or n_chain < 1:
        return tuple(outputs[name].reshape(shape) for name in which)
    n_workers = max(1, min(MAX_THREADS, (os.cpu_count() or 1) // 2))

    def work(item):
        index, batch = item
        valid = ~np.isnan(batch).any(axis=(1, 2))
        if not valid.all():
            batch = batch[valid]
        if batch.shape[0] == 0:
            return
        positions = np.arange(n_param)[index][valid]
        for name, value in _batch_ess(batch, which).items():
            outputs[name][positions] = value

    if n_workers == 1:
        for item in _batches(draws, 1):
            work(item)
    else:
        # NumPy's sorts, FFTs and ufuncs release the GIL; a few batches in memory at once
        with ThreadPoolExecutor(n_workers) as pool:
            pending = []
            for item in _batches(draws, n_workers):
                pending.append(pool.submit(work, item))
                if len(pending) >= n_workers + 2:
                    pending.pop(0).result()
            for future in pending:
                future.result()
    return tuple(outputs[name].reshape(shape) for name in which)


def ess_bulk(draws) -> np.ndarray:
    """Bulk ESS of draws shaped (chains, draws, *parameter_shape) -> parameter_shape."""
    return _run(draws, ("bulk",))[0]


def ess_tail(draws) -> np.ndarray:
    """Tail ESS (5% and 95% quantiles) of draws shaped (chains, draws, *parameter_shape)."""
    return _run(draws, ("tail",))[0]


def ess_bulk_tail(draws) -> tuple[np.ndarray, np.ndarray]:
    """(bulk, tail) ESS of draws shaped (chains, draws, *parameter_shape), each
    parameter_shape; a 1-D input is one chain. Any dtype; computed in float64."""
    return _run(draws, ("bulk", "tail"))
