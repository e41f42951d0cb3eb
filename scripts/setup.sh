#!/usr/bin/env bash
# Install promptsearch and everything it needs on a Debian/Ubuntu machine with Python >= 3.10.
#   bash scripts/setup.sh                  # the tool, at the versions in requirements.lock (what CI tested)
#   bash scripts/setup.sh --dev            # the tool + test dependencies (pytest, MkDocs, psycopg, PostgreSQL's server), locked
#   bash scripts/setup.sh --latest [--dev] # the newest versions pyproject.toml allows instead
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore
cd "$(dirname "$0")/.."
extra="" latest=""
for a in "$@"; do
  case "$a" in
    --dev) extra="[dev]" ;;
    --latest) latest=1 ;;
    *) echo "setup.sh: unknown option $a (use --dev and/or --latest)" >&2; exit 2 ;;
  esac
done

# WordNet glosses for definition-driven template generation (promptsearch t5).
if [ ! -e /usr/share/wordnet/data.noun ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq wordnet-base >/dev/null || echo "note: could not install wordnet-base; 'promptsearch t5' will need --wordnet-dir" >&2
fi

# PostgreSQL's server for the tests of studies on a real database (--dev; they skip without it).
if [ -n "$extra" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq postgresql >/dev/null || echo "note: could not install postgresql; its tests will be skipped" >&2
fi

# The lock was resolved on one Python minor version; elsewhere its pins may not exist.
lock_py=$(sed -n 's/^# python //p' requirements.lock)
py=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
if [ -z "$latest" ] && [ "$py" != "$lock_py" ]; then
  echo "note: requirements.lock was made on Python $lock_py, this is $py: installing the newest allowed versions (--latest)" >&2
  latest=1
fi
constraints=(); [ -z "$latest" ] && constraints=(-c requirements.lock)

# A CPU build of PyTorch first, so that the resolver does not pull a CUDA build.
python3 -c "import torch" 2>/dev/null || python3 -m pip install -q "torch==2.13.0"
python3 -m pip install -q "${constraints[@]}" -e ".${extra}"
