#!/usr/bin/env bash
# SASS of the pipelines the NVIDIA Vulkan driver compiled, for reading what our kernels became
# (instructions, registers, spills). Run on the device machine after a `cluster-cli bench`,
# which fills the driver's shader cache:
#
#   bench/gpu/sass.sh [OUT-DIR]
#
# The cache (~/.cache/nvidia/GLCache/*/*/*.bin) holds zstd frames; those that begin with
# `NVDANVVM` carry the machine code at byte offset (u64 at 80) + 8, (u32 at 76) bytes long,
# which `nvdisasm --binary SM90` reads (CUDA is at /usr/local/cuda on the device machine).
# zstd is not installed there: carry a binary and point $ZSTD at it (`.gpu/zstd`, with
# LD_LIBRARY_PATH for its libraries if they are missing). Prints one line per pipeline:
# instructions, spill loads/stores, global loads, shuffles and the highest register used.
set -euo pipefail
out=${1:-${OUT:-.}/sass}
zstd=${ZSTD:-zstd}
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$out"
for bin in ~/.cache/nvidia/GLCache/*/*/*.bin; do
    python3 - "$bin" "$out" "$zstd" <<'PY'
import re, struct, subprocess, sys
data = open(sys.argv[1], 'rb').read()
for start in (m.start() for m in re.finditer(re.escape(b'\x28\xb5\x2f\xfd'), data)):
    frame = subprocess.run([sys.argv[3], '-d', '-c', '--no-check'], input=data[start:],
                           capture_output=True).stdout
    if frame[:8] != b'NVDANVVM' or len(frame) < 200:
        continue
    size, = struct.unpack_from('<I', frame, 76)
    offset, = struct.unpack_from('<Q', frame, 80)
    open(f'{sys.argv[2]}/k{start}.code', 'wb').write(frame[offset + 8:offset + 8 + size])
PY
done
for code in "$out"/*.code; do
    sass=${code%.code}.sass
    nvdisasm --binary SM90 "$code" > "$sass"
    echo "$(basename "$sass"): $(grep -c '/\*[0-9a-f]*\*/' "$sass") instructions," \
        "LDL $(grep -c LDL "$sass"), STL $(grep -c STL "$sass"), LDG $(grep -c LDG "$sass")," \
        "SHFL $(grep -c SHFL "$sass"), highest register R$(grep -o 'R[0-9]\+' "$sass" | tr -d R | sort -n | tail -1)"
done
