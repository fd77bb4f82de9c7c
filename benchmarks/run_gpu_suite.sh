#!/usr/bin/env bash
# Everything the committed GPU results record, in one device call: the references against eager
# and torch.compile (bench_references.py), the GPU test suite (the same tables as `d2k eval`), and
# the security cases on the cuda backend (6 evaluations at a time: they assert verdicts, not
# speed). Run from the project root:  benchmarks/run_gpu_suite.sh OUT_DIR
# PARTS picks some of "bench tests exploits escapes families awq phases service latency throughput" (default the
# first three) when one call cannot hold them: awq times the AWQ reference's two paths and GEMM tiles
# (awq_large_m_gpu.py); phases, where a warm run_tests episode's time goes (evaluation_phases.py);
# service runs the GPU tests of the evaluation service and memory safety; latency,
# evaluation_latency.py --env on every task; throughput, service_throughput.py.
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
  # -v names each test as it finishes, so a run the time limit cuts still says what failed. The cases
  # are one module's, which pytest-xdist keeps in one process: they run on the driver's threads.
  D2K_SECURITY_WORKERS=${SECURITY_WORKERS:-6} timeout "${EXPLOITS_S:-200}" python3 -m pytest -m gpu \
      tests/test_security.py -v -rA -p no:cacheprovider > "$out/exploits_gpu.log" 2>&1
  grep -E " (FAILED|ERROR|XPASS|XFAIL) " "$out/exploits_gpu.log" | tail -12; tail -1 "$out/exploits_gpu.log"
fi
if [[ $parts == *" escapes "* ]]; then
  # The escaped-solution suite on the GPU: every case must score 0 or earn no more than its honest kernel.
  timeout "${ESCAPES_S:-400}" python3 -m pytest -q -m gpu tests/test_escapes.py -rA -p no:cacheprovider \
      > "$out/escapes_gpu.log" 2>&1
  grep -E " (FAILED|ERROR) " "$out/escapes_gpu.log" | tail -12; tail -1 "$out/escapes_gpu.log"
fi
if [[ $parts == *" families "* ]]; then
  # The catalogue's task families: each script checks its references on every workload and held-out
  # shape and times eager, torch.compile, the library and the reference (wheels: see each script).
  for script in attention_gpu delta_rule_and_paged_prefill_gpu moe_gpu gemm_gpu norm_fusion_gpu \
                sampling_solve_conv_gpu flce_gpu; do
    timeout "${FAMILY_S:-300}" python3 "benchmarks/$script.py" --out "$out" > "$out/$script.log" 2>&1
    echo "$script: exit $?"; tail -3 "$out/$script.log"
  done
fi
if [[ $parts == *" awq "* ]]; then
  PYTHONPATH=. timeout "${AWQ_S:-180}" python3 benchmarks/awq_large_m_gpu.py --json "$out/awq_large_m.json" > "$out/awq_large_m.log" 2>&1
  echo "awq_large_m_gpu: exit $?"; tail -30 "$out/awq_large_m.log"
fi
if [[ $parts == *" phases "* ]]; then
  timeout "${PHASES_S:-90}" python3 benchmarks/evaluation_phases.py --backend cuda --tasks fused_add_rmsnorm --gap 2 \
      --parts episode > "$out/phases.jsonl" 2>&1
  echo "evaluation_phases: exit $?"
fi
if [[ $parts == *" service "* ]]; then
  timeout "${SERVICE_S:-240}" python3 -m pytest -m gpu tests/test_service.py tests/test_memory_safety.py -v -rA \
      -p no:cacheprovider > "$out/service_gpu.log" 2>&1
  grep -E "(PASSED|FAILED|ERROR)" "$out/service_gpu.log" | tail -8; tail -1 "$out/service_gpu.log"
fi
if [[ $parts == *" latency "* ]]; then
  timeout "${LATENCY_S:-330}" python3 benchmarks/evaluation_latency.py --env --backend cuda --calls "${CALLS:-2}" \
      --gap "${GAP:-3}" --json "$out/latency.json" > "$out/latency.log" 2>&1
  tail -22 "$out/latency.log"
fi
if [[ $parts == *" throughput "* ]]; then
  timeout "${THROUGHPUT_S:-330}" python3 benchmarks/service_throughput.py --backend cuda --envs ${ENVS:-1 2 4 8 16} \
      --rounds "${ROUNDS:-2}" --tool "${TOOL:-run_tests}" --json "$out/throughput.json" > "$out/throughput.log" 2>&1
  tail -12 "$out/throughput.log"
fi
