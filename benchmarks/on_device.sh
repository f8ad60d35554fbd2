#!/usr/bin/env bash
# Runs a command against this checkout on the GPU machine, whose image has torch and Triton
# but not this package installed: the import names argus_plugins/argus_conf are made as
# links to plugins/ and conf/, and wheels carried in .whl/ (benchmarks/device_wheels.sh:
# hydra, omegaconf, antlr4, z3, mlflow-skinny and its needs) installed into /tmp/site if present.
# A bubblewrap carried in .whl/bwrap/ (benchmarks/bwrap_carry.sh) is the OS sandbox there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p /tmp/argus-pkgs
ln -sfn "$PWD/plugins" /tmp/argus-pkgs/argus_plugins
ln -sfn "$PWD/conf" /tmp/argus-pkgs/argus_conf
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
# the OS sandbox for untrusted code: the image has no bubblewrap; use one carried in
# .whl/bwrap/ (benchmarks/bwrap_carry.sh) unless the machine has its own or ARGUS_BWRAP is set
if [ -z "${ARGUS_BWRAP:-}" ] && ! command -v bwrap >/dev/null && [ -x .whl/bwrap/bwrap ]; then
  export ARGUS_BWRAP="$PWD/.whl/bwrap/bwrap"
fi
export PYTHONPATH="$PWD:/tmp/argus-pkgs:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=/tmp/triton-cache MLFLOW_DISABLE_TELEMETRY=true
exec "$@"
