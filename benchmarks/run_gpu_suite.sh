#!/usr/bin/env bash
# Everything the committed GPU results record, in one device call: the references against eager
# and torch.compile (bench_references.py), the GPU test suite (the same tables as `d2k eval`), and
# the red-team and hold-out exploits on the cuda backend (6 at a time: they assert verdicts, not
# speed). Run from the project root:  benchmarks/run_gpu_suite.sh OUT_DIR
# PARTS picks some of "bench tests exploits" (default all three) when one call cannot hold them.
set -uo pipefail
out=${1:?usage: benchmarks/run_gpu_suite.sh OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } | tee "$out/device.txt"
parts=" ${PARTS:-bench tests exploits} "
if [[ $parts == *" bench "* ]]; then
  timeout "${BENCH_S:-220}" python3 benchmarks/bench_references.py --out "$out" > "$out/bench.log" 2>&1
  grep -v '^|' "$out/bench.log" | tail -15
fi
if [[ $parts == *" tests "* ]]; then
  timeout "${TESTS_S:-450}" python3 -m pytest tests/test_gpu.py -s -v -rA --durations=8 -p no:cacheprovider > "$out/test_gpu.log" 2>&1
  grep -E "(PASSED|FAILED|ERROR)$" "$out/test_gpu.log" | tail -16; tail -1 "$out/test_gpu.log"
fi
if [[ $parts == *" exploits "* ]]; then
  # -v names each test as it finishes, so a run the time limit cuts still says what failed
  timeout "${EXPLOITS_S:-200}" python3 -m pytest -m gpu tests/test_redteam.py tests/test_holdout*.py \
      -n 6 -v -rA -p no:cacheprovider > "$out/exploits_gpu.log" 2>&1
  grep -E " (FAILED|ERROR|XPASS|XFAIL) " "$out/exploits_gpu.log" | tail -12; tail -1 "$out/exploits_gpu.log"
fi
