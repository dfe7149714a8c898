"""One NumPyro row measured in pieces that outlive their process, for a row that one device
command (10 minutes) cannot hold: sv at 65536 chains, whose round alone runs past it.

``numpyro_gpu.py --resume-dir DIR`` (one model, one chain count) runs the timed round of
``numpyro_gpu.py`` (the same key, the same ``MCMC``/``NUTS``, warmup then sampling) as
consecutive pieces of ``--piece`` iterations. After each piece the chains' state (NumPyro's
``HMCState``, as ``MCMC.last_state`` leaves it), the piece's ``num_steps`` and ``diverging`` and,
once sampling, its draws are written to DIR, and ``progress.json`` last; the same command again
carries on from there, and once every piece has run it computes the ESS and prints the row.
It is the same computation as one ``MCMC.warmup`` + ``MCMC.run``: NumPyro's NUTS adapts while the
state's iteration counter is below ``num_warmup`` (``hmc.sample_kernel``), whoever drives the
loop, and the state carries the chains' random keys (``bench/gpu/test_resumable.py`` checks that
the draws and step counts equal the one-piece round's).

Time, ``wall_s``: the chains' initialisation plus, per piece, its wall time (to
``block_until_ready``) less the time JAX spent tracing, lowering and compiling in it (the union
of the spans of its ``/jax/core/compile/*`` monitoring events), so compilation is excluded as the
second of two rounds excludes it; that time is ``compile_s``. Reading and writing DIR is outside
the timed spans. The row says ``"protocol": "pieces"``, with the number of pieces and processes.
"""
from __future__ import annotations

import json
import os
import pickle
import time

import numpy as np

from common import params
from numpyro_gpu import CompileClock, build_mcmc, log, make_row, round_keys, use_compile_cache

PROGRESS = "progress.json"
STATE = "state.pkl"
ROW = "row.json"


def _write_atomically(path: str, data: bytes) -> None:
    temporary = path + ".partial"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)


def _save_state(directory: str, state) -> None:
    import jax

    _write_atomically(os.path.join(directory, STATE), pickle.dumps(jax.device_get(state)))


def _load_state(directory: str):
    import jax
    import jax.numpy as jnp

    with open(os.path.join(directory, STATE), "rb") as f:
        return jax.tree.map(jnp.asarray, pickle.load(f))


def _piece_path(directory: str, index: int, name: str) -> str:
    return os.path.join(directory, f"piece{index:04d}.{name}.npy")


def stacked(directory: str, indices, name: str) -> np.ndarray:
    """Array ``name`` (``num_steps``, ``diverging``, ``z.<site>``) of the pieces ``indices``,
    joined along the iterations (axis 1: chains first)."""
    return np.concatenate([np.load(_piece_path(directory, i, name)) for i in indices], axis=1)


def _settings(model: str, n_chains: int, args) -> dict:
    return {"model": model, "chains": n_chains, "warmup": args.warmup, "draws": args.draws,
            "seed": args.seed, "piece": args.piece, "x64": bool(args.x64)}


def run(model: str, n_chains: int, args) -> dict | None:
    """Run pieces until ``args.time_limit`` seconds would be passed; the row once all ran (and
    its ESS fits), else None (run the same command again)."""
    import jax

    started = time.perf_counter()
    directory = args.resume_dir
    os.makedirs(directory, exist_ok=True)
    row_path = os.path.join(directory, ROW)
    if os.path.exists(row_path):
        with open(row_path) as f:
            return json.load(f)
    settings = _settings(model, n_chains, args)
    for phase, count in (("warmup", args.warmup), ("draws", args.draws)):
        if count % args.piece:
            raise ValueError(f"--piece {args.piece} does not divide --{phase} {count}")
    progress_path = os.path.join(directory, PROGRESS)
    if os.path.exists(progress_path):
        with open(progress_path) as f:
            progress = json.load(f)
        if progress["settings"] != settings:
            raise ValueError(f"{directory} holds a run of {progress['settings']}, not {settings}")
    else:
        progress = {"settings": settings, "done": 0, "init_s": None, "pieces": [],
                    "processes": 0}
    progress["processes"] += 1
    if not args.compile_cache:
        # Later processes load what the first compiled (compile time is excluded either way).
        use_compile_cache(os.path.join(directory, "jax-cache"))

    mcmc, kwargs, exclude = build_mcmc(model, n_chains, args.warmup, args.piece)
    clock = CompileClock()
    total = args.warmup + args.draws
    if progress["init_s"] is None:
        _, timed_key = round_keys(args.seed)
        clock.reset()
        begun = time.perf_counter()
        state = mcmc.sampler.init(jax.random.split(timed_key, n_chains), args.warmup, None,
                                  model_args=(), model_kwargs=kwargs)
        jax.block_until_ready(state)
        seconds = time.perf_counter() - begun
        progress["init_s"] = seconds - clock.seconds()
        progress["init_compile_s"] = clock.seconds()
        _save_state(directory, state)
        _write_atomically(progress_path, json.dumps(progress).encode())
    else:
        state = _load_state(directory)
        # Builds the kernel's (vectorised) functions in this process; its state is dropped.
        jax.block_until_ready(mcmc.sampler.init(state.rng_key, args.warmup, None,
                                                model_args=(), model_kwargs=kwargs))

    estimate = max((p["seconds"] for p in progress["pieces"]), default=0.0)
    ran = 0
    while progress["done"] < total:
        if args.pieces_per_process and ran == args.pieces_per_process:
            break
        ran += 1
        left = args.time_limit - (time.perf_counter() - started) if args.time_limit else None
        if left is not None and estimate * 1.15 > left:
            log(f"  ({model}, {n_chains} chains: {progress['done']} of {total} iterations; "
                f"the next piece (~{estimate:.0f} s) does not fit {left:.0f} s: run again)")
            break
        index = len(progress["pieces"])
        sampling = progress["done"] >= args.warmup
        fields = ("num_steps", "diverging") if sampling else ("num_steps",) + exclude
        mcmc.post_warmup_state = state
        clock.reset()
        begun = time.perf_counter()
        mcmc.run(state.rng_key, extra_fields=fields, **kwargs)
        extra = mcmc.get_extra_fields(group_by_chain=True)
        samples = mcmc.get_samples(group_by_chain=True) if sampling else {}
        state = mcmc.last_state
        jax.block_until_ready((extra, samples, state))
        seconds = time.perf_counter() - begun
        compile_s = clock.seconds()

        np.save(_piece_path(directory, index, "num_steps"), np.asarray(extra["num_steps"]))
        if sampling:
            np.save(_piece_path(directory, index, "diverging"), np.asarray(extra["diverging"]))
            for site, value in samples.items():
                np.save(_piece_path(directory, index, "z." + site), np.asarray(value))
        _save_state(directory, state)
        progress["done"] += args.piece
        progress["pieces"].append({"seconds": seconds, "compile_s": compile_s,
                                   "sampling": sampling, "process": progress["processes"]})
        _write_atomically(progress_path, json.dumps(progress).encode())
        estimate = max(estimate, seconds)
        log(f"  ({model}, {n_chains} chains: piece {index} ({'draws' if sampling else 'warmup'}) "
            f"{seconds:.1f} s, compile {compile_s:.1f} s; {progress['done']} of {total})")
    if progress["done"] < total:
        return None

    elapsed = time.perf_counter() - started
    if args.time_limit and elapsed > args.time_limit / 2:
        log(f"  ({model}, {n_chains} chains: all pieces ran; ESS in the next run)")
        return None
    row = _row(model, n_chains, args, progress)
    _write_atomically(row_path, json.dumps(row).encode())
    return row


def _row(model: str, n_chains: int, args, progress: dict) -> dict:
    pieces = progress["pieces"]
    directory = args.resume_dir
    warm = [i for i, p in enumerate(pieces) if not p["sampling"]]
    draws = [i for i, p in enumerate(pieces) if p["sampling"]]
    samples = {p.name: stacked(directory, draws, "z." + p.name) for p in params(model)}
    wall = progress["init_s"] + sum(p["seconds"] - p["compile_s"] for p in pieces)
    compile_s = progress["init_compile_s"] + sum(p["compile_s"] for p in pieces)
    return make_row(model, n_chains, args, wall=wall, compile_s=compile_s,
                    warm_steps=stacked(directory, warm, "num_steps"),
                    sample_steps=stacked(directory, draws, "num_steps"),
                    diverging=stacked(directory, draws, "diverging"), samples=samples,
                    protocol="pieces", pieces=len(pieces), piece_iterations=args.piece,
                    processes=progress["processes"], init_s=progress["init_s"])
