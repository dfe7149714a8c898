#!/usr/bin/env bash
# The GPU benchmark on the device machine (bench/gpu/README.md): ours (`cluster-cli bench --device
# gpu`), then NumPyro's vectorised chains on the same GPU (and, when asked, BlackJAX's
# many-chain samplers), then the markdown comparison.
#
# Run from the repository root on the device machine, with `.gl/` (Vulkan loader debs) and
# `.gpu/cluster-cli` (a stripped release build) carried:
#
#   bench/gpu/run_device.sh [--budget SECONDS] [--models a,b] [--chains 1,64,...]
#                           [--warmup N] [--draws N] [--pieces N]
#                           [--only ours|numpyro|blackjax] [--frameworks ours,numpyro,blackjax]
#                           [--samplers nuts,chees,meads,laps] [--ours-share FRACTION]
#                           [--numpyro-share FRACTION] [--local]
#                           [-- BENCH-ARGS...]
#
# --budget bounds the whole call (default 510 s, under the device tool's 10 minutes per
# command): ours gets --ours-share of it (default 0.4), NumPyro what is left minus a margin
# for the report. Each side starts no new row past its share and is killed at its end; rows
# already measured are kept (both write one JSON line per row as it completes). --warmup and
# --draws (default 400 each, the NumPyro anchor's) go to both. Arguments after `--` go to
# `cluster-cli bench` only (e.g. `--kernel fused`, `--data storage`, `--precision f64`).
#
# --pieces N measures each NumPyro row in a process of its own, its timed round run in pieces
# of N iterations (N divides --warmup and --draws; N = --warmup runs warmup, then sampling)
# without the untimed first round (numpyro_gpu.py --resume-dir, bench/gpu/resumable.py); the
# table's rows marked ‡ were measured that way. Each row's state is kept in $NP_STATE
# (default .np/) so that a call cut short can be run again on the same machine to finish its
# rows; a finished row found there is printed again, not measured again (remove the
# directory for a new measurement).
#
# NumPyro's programs go to JAX's persistent compilation cache ($JAX_CACHE, default
# /tmp/jax-cache): a second call on the same machine compiles less (compile time is excluded
# from the figures either way).
#
# --frameworks picks the sides, a comma list of ours, numpyro, blackjax (default ours,numpyro;
# --only X is --frameworks X). BlackJAX (bench/gpu/blackjax_gpu.py, its samplers picked by
# --samplers, default nuts,chees,meads,laps) needs its wheels carried in `.whl/` (the device
# machine has JAX and NumPyro but no BlackJAX and no internet): blackjax is installed from
# there into /tmp/site (on PYTHONPATH), and each other wheel there (optax, absl-py) only if its
# module does not import already. With NumPyro and BlackJAX both, NumPyro gets
# --numpyro-share (default 0.5) of what ours left, BlackJAX the rest.
#
# --local skips the Vulkan set-up (for a try on a machine with lavapipe); $PYTHON picks the
# interpreter (default python3).
#
# Writes to $OUT (the device tool's output folder; ./gpu-bench-out if unset): devices.txt,
# ours.txt, ours.jsonl, numpyro.txt, numpyro.jsonl, blackjax.txt, blackjax.jsonl, report.md.
set -uo pipefail

budget=510
models=eight_schools_noncentered,logistic,sv
chains=1,64,1024,8192,65536
only=
frameworks=ours,numpyro
samplers=nuts,chees,meads,laps
ours_share=0.4
numpyro_share=0.5
local=
warmup=400
draws=400
pieces=
bench_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --budget) budget=$2; shift 2 ;;
        --models) models=$2; shift 2 ;;
        --chains) chains=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --frameworks) frameworks=$2; shift 2 ;;
        --samplers) samplers=$2; shift 2 ;;
        --ours-share) ours_share=$2; shift 2 ;;
        --numpyro-share) numpyro_share=$2; shift 2 ;;
        --local) local=1; shift ;;
        --warmup) warmup=$2; shift 2 ;;
        --draws) draws=$2; shift 2 ;;
        --pieces) pieces=$2; shift 2 ;;
        --) shift; bench_args=("$@"); break ;;
        *) echo "run_device.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
case "$only" in ""|ours|numpyro|blackjax) ;; *) echo "run_device.sh: --only ours|numpyro|blackjax" >&2; exit 2 ;; esac
[ -n "$only" ] && frameworks=$only
want() { case ",$frameworks," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
for f in ${frameworks//,/ }; do
    case "$f" in ours|numpyro|blackjax) ;; *) echo "run_device.sh: unknown framework $f" >&2; exit 2 ;; esac
done

OUT=${OUT:-./gpu-bench-out}
mkdir -p "$OUT"
started=$(date +%s)
elapsed() { echo $(( $(date +%s) - started )); }

# The Vulkan loader and NVIDIA's ICD, as bench/gpu/README.md says.
if [ -z "$local" ] && ls .gl/*.deb >/dev/null 2>&1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
if [ -z "$local" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/xdg}
mkdir -p "$XDG_RUNTIME_DIR"

cli=.gpu/cluster-cli
if [ -f "$cli" ] && [ ! -x "$cli" ]; then
    # A carried file may lose its mode; a read-only tree needs a copy.
    chmod +x "$cli" 2>/dev/null || { cp "$cli" /tmp/cluster-cli && chmod +x /tmp/cluster-cli && cli=/tmp/cluster-cli; }
fi
[ -x "$cli" ] || cli=$(command -v cluster-cli || true)
python=${PYTHON:-$(command -v python3 || command -v python)}

if [ -n "$cli" ]; then
    "$cli" devices > "$OUT/devices.txt" 2>&1 || true
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> "$OUT/devices.txt" 2>&1 || true
fi

model_paths=()
IFS=, read -ra model_names <<< "$models"
for m in "${model_names[@]}"; do model_paths+=("models/$m.json"); done

ours_budget=$(awk -v b="$budget" -v s="$ours_share" 'BEGIN { printf "%d", b * s }')
if want ours; then
    if [ -z "$cli" ]; then
        echo "no cluster-cli: build it and copy it to .gpu/ (bench/gpu/README.md)" | tee "$OUT/ours.txt"
    else
        # New rows start until 60% of the share; the rest is room for the last row.
        ours_limit=$(( ours_budget * 6 / 10 ))
        echo "== ours (budget ${ours_budget} s) =="
        timeout -k 5 "$ours_budget" "$cli" bench --device gpu --chains "$chains" \
            --warmup "$warmup" --draws "$draws" --time-limit "$ours_limit" \
            --json "$OUT/ours.jsonl" "${bench_args[@]}" \
            "${model_paths[@]}" 2>&1 | tee "$OUT/ours.txt"
        echo "(ours: exit ${PIPESTATUS[0]} after $(elapsed) s)" | tee -a "$OUT/ours.txt"
    fi
fi

if want numpyro; then
    left=$(( budget - $(elapsed) - 15 ))
    if want blackjax; then
        left=$(awk -v l="$left" -v s="$numpyro_share" 'BEGIN { printf "%d", l * s }')
    fi
    if [ "$left" -lt 30 ]; then
        echo "no time left for NumPyro ($left s)" | tee "$OUT/numpyro.txt"
    elif [ -n "$pieces" ]; then
        # One process per row, its round in pieces of $pieces iterations (no untimed first
        # round), its state in $NP_STATE (see the top of this file).
        echo "== NumPyro, rows in pieces of $pieces (budget ${left} s) =="
        numpyro_end=$(( $(elapsed) + left ))
        : > "$OUT/numpyro.jsonl"
        : > "$OUT/numpyro.txt"
        IFS=, read -ra chain_counts <<< "$chains"
        for m in "${model_names[@]}"; do
            for c in "${chain_counts[@]}"; do
                row_left=$(( numpyro_end - $(elapsed) ))
                if [ "$row_left" -lt 30 ]; then
                    echo "| $m | $c | skipped: no time left |" | tee -a "$OUT/numpyro.txt"
                    continue
                fi
                timeout -k 5 "$row_left" "$python" bench/gpu/numpyro_gpu.py --models "$m" \
                    --chains "$c" --warmup "$warmup" --draws "$draws" --piece "$pieces" \
                    --resume-dir "${NP_STATE:-.np}/$m-$c-$warmup-$draws-$pieces" --time-limit "$row_left" \
                    --compile-cache "${JAX_CACHE:-/tmp/jax-cache}" \
                    >> "$OUT/numpyro.jsonl" 2> >(tee -a "$OUT/numpyro.txt" >&2)
            done
        done
        echo "(numpyro: after $(elapsed) s)" | tee -a "$OUT/numpyro.txt"
    else
        numpyro_limit=$(( left * 6 / 10 ))
        echo "== NumPyro (budget ${left} s) =="
        timeout -k 5 "$left" "$python" bench/gpu/numpyro_gpu.py --models "$models" \
            --chains "$chains" --warmup "$warmup" --draws "$draws" --time-limit "$numpyro_limit" \
            --compile-cache "${JAX_CACHE:-/tmp/jax-cache}" \
            > "$OUT/numpyro.jsonl" 2> >(tee "$OUT/numpyro.txt" >&2)
        echo "(numpyro: exit $? after $(elapsed) s)" | tee -a "$OUT/numpyro.txt"
    fi
fi

if want blackjax; then
    left=$(( budget - $(elapsed) - 15 ))
    if ls .whl/*.whl >/dev/null 2>&1; then
        # blackjax always; its dependencies only where the image lacks them.
        site=/tmp/site
        for w in .whl/*.whl; do
            name=$(basename "$w" | cut -d- -f1)
            case "$name" in
                blackjax) module= ;;
                absl_py) module=absl ;;
                *) module=$name ;;
            esac
            if [ -z "$module" ] || ! "$python" -c "import $module" 2>/dev/null; then
                "$python" -m pip install -q --no-index --no-deps --target "$site" "$w" \
                    && echo "installed $(basename "$w") into $site"
            fi
        done
        export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    fi
    if [ "$left" -lt 30 ]; then
        echo "no time left for BlackJAX ($left s)" | tee "$OUT/blackjax.txt"
    else
        blackjax_limit=$(( left * 6 / 10 ))
        echo "== BlackJAX $samplers (budget ${left} s) =="
        timeout -k 5 "$left" "$python" bench/gpu/blackjax_gpu.py --models "$models" \
            --samplers "$samplers" --chains "$chains" --warmup "$warmup" --draws "$draws" \
            --time-limit "$blackjax_limit" --compile-cache "${JAX_CACHE:-/tmp/jax-cache}" \
            > "$OUT/blackjax.jsonl" 2> >(tee "$OUT/blackjax.txt" >&2)
        echo "(blackjax: exit $? after $(elapsed) s)" | tee -a "$OUT/blackjax.txt"
    fi
fi

reports=()
for f in ours numpyro blackjax; do
    if want "$f" || [ -f "$OUT/$f.jsonl" ]; then reports+=("$OUT/$f.jsonl"); fi
done
"$python" bench/gpu/report.py "${reports[@]}" > "$OUT/report.md" 2>&1
cat "$OUT/report.md"
echo "(total $(elapsed) s)"
