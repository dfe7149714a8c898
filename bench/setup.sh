#!/usr/bin/env bash
# Builds the benchmark's Python environment, .venv-bench/ at the repository root (override
# with BENCH_VENV), from PyPI: PyStan 3 (httpstan bundles Stan 2.35 and stanc), nutpie, PyMC,
# NumPyro on CPU JAX, ArviZ and matplotlib, at the exact versions of bench/requirements.txt.
# Idempotent: does nothing when the environment already matches the requirements.
# Needs Python 3.11 (python3.11, or python3 if that is 3.11; override with PYTHON) and a C++
# compiler (httpstan compiles each Stan program; PyStan builds a Python extension with it),
# which it installs with apt-get on Debian when missing. cluster-cli is built by bench/run.py.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${BENCH_VENV:-.venv-bench}"
requirements=bench/requirements.txt
stamp="$venv/.requirements.sha256"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

python="${PYTHON:-}"
if [ -z "$python" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = 3.11 ]; then
      python="$candidate"
      break
    fi
  done
fi
if [ -z "$python" ]; then
  echo "bench/setup.sh: Python 3.11 not found (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi

# A C++ compiler and Python's headers, for httpstan's model builds.
if ! command -v g++ >/dev/null 2>&1 ||
   [ ! -f "$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
  if command -v apt-get >/dev/null 2>&1; then
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ python3-dev python3-venv >/dev/null
  else
    echo "bench/setup.sh: install a C++ compiler (g++) and Python 3.11's headers" >&2
    exit 1
  fi
fi

want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "bench/setup.sh: $venv is up to date"
  exit 0
fi

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
for attempt in 1 2 3; do
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements" && break
  [ "$attempt" = 3 ] && exit 1
  sleep 5
done
"$venv/bin/python" - <<'PY'
import arviz, jax, matplotlib, numpyro, nutpie, pymc, stan
print("bench/setup.sh: pystan", stan.__version__, "| nutpie", nutpie.__version__, "| pymc",
      pymc.__version__, "| numpyro", numpyro.__version__, "| jax", jax.__version__, "| arviz",
      arviz.__version__, "| matplotlib", matplotlib.__version__)
PY
echo "$want" > "$stamp"
