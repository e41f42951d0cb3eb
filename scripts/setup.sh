#!/usr/bin/env bash
# Install promptsearch and everything it needs on a Debian/Ubuntu machine with Python >= 3.10.
#   bash scripts/setup.sh          # the tool
#   bash scripts/setup.sh --dev    # the tool + test dependencies
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore
cd "$(dirname "$0")/.."
extra=""
[ "${1:-}" = "--dev" ] && extra="[dev]"

# WordNet glosses for definition-driven template generation (promptsearch t5).
if [ ! -e /usr/share/wordnet/data.noun ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq wordnet-base >/dev/null || echo "note: could not install wordnet-base; 'promptsearch t5' will need --wordnet-dir" >&2
fi

# A CPU build of PyTorch first, so that the resolver does not pull a CUDA build.
python3 -c "import torch" 2>/dev/null || python3 -m pip install -q "torch==2.13.0"
python3 -m pip install -q -e ".${extra}"
