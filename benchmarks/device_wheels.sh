#!/usr/bin/env bash
# Fetches into .whl/ the wheels the lent GPU machine lacks (Python 3.12, x86-64, no package
# registry there): hydra, omegaconf, antlr4 and z3 for the pipeline, and mlflow-skinny with
# the packages it imports for an sqlite store (the image already has numpy, pandas,
# protobuf, requests, pyyaml, click, ... — see the device entry's KINDS.md). Under 64 MiB
# in all (z3 is 38 MiB); `benchmarks/on_device.sh` installs them into /tmp/site there.
#
#   bash benchmarks/device_wheels.sh && <device run with carry [".whl"]>
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .whl
grep -qx '.whl/' .gitignore 2>/dev/null || echo '.whl/' >>.gitignore
dl() {
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "$@"
}
dl hydra-core==1.3.2 omegaconf==2.3.0 z3-solver==5.4.1.0
# antlr4 4.9.3 (hydra's pin) ships only as an sdist: build its wheel here (pure Python)
ls .whl/antlr4_python3_runtime-4.9.3-*.whl >/dev/null 2>&1 ||
  "$PY" -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
# mlflow-skinny and what importing it with an sqlite store needs, missing from the image
dl mlflow-skinny==3.17.2 mlflow-tracing==3.17.2 alembic sqlalchemy mako \
  cachetools databricks-sdk google-auth pyasn1 pyasn1-modules cryptography cffi pycparser \
  fastapi starlette uvicorn gitpython gitdb smmap importlib-metadata \
  opentelemetry-api opentelemetry-sdk opentelemetry-proto opentelemetry-semantic-conventions \
  pydantic pydantic-core annotated-types typing-inspection python-dotenv sqlparse
du -sh .whl
