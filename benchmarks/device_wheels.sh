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
# the result cache, the progress bar and the tables (pure Python)
dl diskcache==5.6.3 tqdm==4.70.1 tabulate==0.10.0
# antlr4 4.9.3 (hydra's pin) ships only as an sdist: build its wheel here (pure Python)
ls .whl/antlr4_python3_runtime-4.9.3-*.whl >/dev/null 2>&1 ||
  "$PY" -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
# mlflow-skinny and what importing it with an sqlite store needs, missing from the image.
# Every version pinned (--no-deps resolves nothing): a set pip resolves together with
# mlflow-skinny 3.17.2 (unpinned, pip fetched importlib-metadata 10 and cachetools 8, which
# mlflow-skinny 3.17 refuses: it failed to start). tests/core/test_device_wheels.py checks
# these pins against each other's declared requirements.
dl mlflow-skinny==3.17.2 mlflow-tracing==3.17.2 alembic==1.20.1 sqlalchemy==2.1.9 \
  mako==1.4.3 cachetools==7.3.3 databricks-sdk==0.162.0 google-auth==2.63.0 pyasn1==0.6.5 \
  pyasn1-modules==0.4.2 cryptography==50.0.2 cffi==2.1.1 pycparser==3.12 fastapi==0.165.0 \
  starlette==1.10.0 uvicorn==0.54.0 gitpython==3.2.1 gitdb==4.0.12 smmap==5.0.3 \
  importlib-metadata==8.9.0 opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 \
  opentelemetry-proto==1.45.2 opentelemetry-semantic-conventions==0.66b2 pydantic==2.14.4 \
  pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  python-dotenv==1.2.4 sqlparse==0.6.1 filelock==4.3.1
du -sh .whl
