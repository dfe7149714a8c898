#!/usr/bin/env bash
# Two builds of cluster-cli against each other on the device machine, alternating runs so that
# the GPU's and the host's drift fall on both: for each round, each model, each build, one
# `cluster-cli bench --device gpu` row (no CPU check, no round trip) with the dispatch
# timeline on. Prints one line per run: wall, NUTS kernel, warmup and sampling seconds, min
# bulk-ESS/s, and the median time the host took to record a batch of draws.
#
#   bench/gpu/ab.sh [--rounds N] [--chains N] [--models a,b] [--local] BUILD_A BUILD_B [-- BENCH-ARGS...]
#
# BUILD_A and BUILD_B are stripped binaries carried in .gpu/ (bench/gpu/README.md). Writes
# $OUT/ab.jsonl (each row with "build" and "round") and $OUT/ab.txt; arguments after `--`
# go to both builds (e.g. `--index-checks all`, `--data storage`).
set -uo pipefail

rounds=2
chains=8192
models=logistic
local=
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --chains) chains=$2; shift 2 ;;
        --models) models=$2; shift 2 ;;
        --local) local=1; shift ;;
        -*) echo "ab.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "usage: ab.sh [options] BUILD_A BUILD_B [-- BENCH-ARGS...]" >&2; exit 2; }
builds=("$1" "$2")
shift 2
[ "${1:-}" = -- ] && shift
bench_args=("$@")

OUT=${OUT:-./gpu-bench-out}
mkdir -p "$OUT"
if [ -z "$local" ]; then
    for f in .gl/*.deb; do dpkg -x "$f" / >/dev/null; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/xdg}
mkdir -p "$XDG_RUNTIME_DIR"

: > "$OUT/ab.jsonl"
IFS=, read -ra model_names <<< "$models"
for round in $(seq 1 "$rounds"); do
    for m in "${model_names[@]}"; do
        for build in "${builds[@]}"; do
            log=$(mktemp)
            json=$(mktemp)
            RUST_LOG=gpu_actor::timeline=debug "$build" bench --device gpu --chains "$chains" \
                --no-check --round-trips 0 --json "$json" "${bench_args[@]}" "models/$m.json" \
                > "$log" 2>&1
            python3 - "$json" "$log" "$build" "$round" >> "$OUT/ab.jsonl" <<'PY'
import json, re, statistics, sys
path, log, build, rnd = sys.argv[1:]
# The timed round is the last run in the log; its sampling batches come after "warmup".
text = open(log).read().split("first step-size search")[-1].split("warmup ms=")[-1]
records = [float(ms) for ms, draws in re.findall(r"record_ms=([\d.]+) draws=(\d+)", text)
           if int(draws) > 0]
for line in open(path):
    row = json.loads(line)
    if row.get("kind") != "row":
        continue
    row.update(build=build, round=int(rnd),
               record_ms_median=statistics.median(records) if records else None)
    print(json.dumps(row))
PY
            rm -f "$log" "$json"
        done
    done
done

python3 - "$OUT/ab.jsonl" <<'PY' | tee "$OUT/ab.txt"
import json, sys
print("| round | model | chains | build | wall s | kernel s | warmup s | sampling s | min bulk-ESS/s | record ms (median) |")
print("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "wall_s" not in r:
        continue
    rec = r.get("record_ms_median")
    print(f"| {r['round']} | {r['model']} | {r['chains']} | {r['build']} | {r['wall_s']:.3f} | "
          f"{r['kernel_s']:.3f} | {r['warmup_s']:.3f} | {r['sampling_s']:.3f} | "
          f"{r['min_ess_bulk_per_s']:.4g} | {'' if rec is None else f'{rec:.2f}'} |")
PY
