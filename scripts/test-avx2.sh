#!/usr/bin/env bash
# Re-run the kernel- and precision-sensitive tests (marker "kernels") with every CPU kernel library
# restricted to AVX2: what a CPU without AVX-512/AMX computes. A machine with AMX then catches what
# would fail on an AVX2-only one. Where the CPU has no AVX-512 the first run already used AVX2
# kernels, and this one is skipped. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! grep -qE '\bavx512|\bamx' /proc/cpuinfo 2>/dev/null; then
  echo "test-avx2: this CPU has no AVX-512/AMX: the test run above already used AVX2 kernels; nothing to re-run"
  exit 0
fi
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2
echo "test-avx2: re-running the tests marked 'kernels' with AVX2-only kernels ($ATEN_CPU_CAPABILITY, oneDNN $ONEDNN_MAX_CPU_ISA, MKL $MKL_ENABLE_INSTRUCTIONS)"
exec python3 -m pytest -m "kernels and not slow" "$@"
