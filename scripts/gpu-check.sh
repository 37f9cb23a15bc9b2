#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU, in two parts that each fit a short session on a rented
# machine (each under BUDGET_S seconds, default 290: the check part gives the NVML checks up to a
# third of it and the benchmark the rest), writing everything into OUTDIR:
#   scripts/gpu-check.sh build OUTDIR [--source llama.cpp.tar.xz]
#       the machine's facts (GPU, driver, toolkit, libnvidia-ml), then a CUDA llama-server for the
#       GPUs present (npm run llama-server:build -- --cuda), into the cache
#   scripts/gpu-check.sh check OUTDIR
#       the NVML checks (test/fixtures/gpu-checks.ts) and `bench:pacing --gpu`
#   scripts/gpu-check.sh all OUTDIR [--source …]    both, one after the other
#   scripts/gpu-check.sh resume OUTDIR
#       optional, ~2 minutes: what starting a window costs one CUDA llama-server
#       (`bench:pacing --gpu --resume-cost`), the figure that explains a token split leaning
#       toward the larger window
#   scripts/gpu-check.sh trace OUTDIR
#       ~1.5 minutes: where the lighter engine's windows go at 2:1 (`bench:pacing --gpu --scenarios
#       2:1 --modes gate,naive --measure-s 10 --trace`): trace-gpu.json (every gate's stops and
#       continues with the registry it read, the /metrics polls, each engine's tokens, NVML) and the
#       analysis (lost windows per engine and their causes) in trace.log
#   scripts/gpu-check.sh trace-lock OUTDIR
#       ~45 s: the same traced gate run with the CUDA driver's lock as its stop (`gpu-share run
#       --stop-method cuda-lock`: cuCheckpointProcessLock waits for the engine's queued work; driver
#       550+, SIGSTOP where it fails): trace-gpu-lock.json beside trace's SIGSTOP figures
#   scripts/gpu-check.sh estimates OUTDIR
#       ~1 minute: the planner's estimate before a first load against NVML's peak during the load,
#       three generated models at two context sizes (test/fixtures/gpu-estimates.ts): estimates.txt
#   scripts/gpu-check.sh coop OUTDIR
#       the built-in engine on the GPU (`bench:pacing --gpu --engine builtin`: free, gate and
#       coop, its cooperative gate); needs node-llama-cpp's CUDA build in node_modules
# Needs Node (node on PATH, or $NODE), a C compiler, CMake and the CUDA toolkit, and this project
# built (npm run build). A part that fails is recorded and the rest still runs; the exit code is
# 2 without a GPU (one line), 1 when anything failed, 0 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 2
part=${1:-}
out=${2:-}
shift 2 2>/dev/null || true
if [ "$part" != build ] && [ "$part" != check ] && [ "$part" != all ] && [ "$part" != resume ] && [ "$part" != coop ] && [ "$part" != trace ] && [ "$part" != trace-lock ] && [ "$part" != estimates ] || [ -z "$out" ]; then
  echo "usage: scripts/gpu-check.sh build|check|all|resume|coop|trace|trace-lock|estimates OUTDIR [--source llama.cpp.tar.xz]" >&2
  exit 2
fi
node=${NODE:-node}
budget=${BUDGET_S:-290}
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU here (nvidia-smi -L lists none)" >&2
  exit 2
fi
if ! "$node" --version >/dev/null 2>&1; then
  echo "gpu-check: no Node ($node): put node on PATH or set NODE" >&2
  exit 2
fi
if [ "$part" != build ] && [ ! -f dist/test/bench/pacing-bench.js ]; then
  echo "gpu-check: the project is not built (npm run build)" >&2
  exit 2
fi
# A copy of the project without its runtime dependencies (plan reads a model's header with
# node-llama-cpp) would fail every check that starts gpu-share: say so before spending the session.
if [ "$part" != build ] && ! "$node" --input-type=module -e '
import { readFileSync } from "node:fs";
const names = Object.keys(JSON.parse(readFileSync("package.json", "utf8")).dependencies ?? {});
const missing = names.filter((name) => { try { import.meta.resolve(name); return false; } catch { return true; } });
if (missing.length > 0) {
  console.error(`gpu-check: the project'"'"'s dependencies are not installed: ${missing.join(", ")} (npm ci --omit=dev)`);
  process.exit(2);
}'; then
  exit 2
fi
mkdir -p "$out"
failed=0
step() { # name, seconds, log file, command…: runs it under its budget, records its exit code and time
  local name=$1 seconds=$2 log=$3
  shift 3
  local started=$SECONDS
  timeout --kill-after=5 "$seconds" "$@" >"$log" 2>&1
  local rc=$?
  echo "gpu-check: $name: exit $rc after $((SECONDS - started)) s (log: $log)" | tee -a "$out/summary.txt"
  [ $rc -eq 0 ] || failed=1
  return $rc
}

if [ "$part" = build ] || [ "$part" = all ]; then
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "nvidia-smi -L: $(nvidia-smi -L 2>&1 | tr '\n' ' ')"
    echo "GPU: $(nvidia-smi --query-gpu=name,uuid,compute_cap,driver_version,memory.total,memory.used --format=csv,noheader 2>&1 | tr '\n' ' ')"
    echo "libnvidia-ml: $(ldconfig -p 2>/dev/null | grep -m2 libnvidia-ml | tr -s ' \n' ' ')"
    echo "nvcc: $( (command -v nvcc || ls /usr/local/cuda/bin/nvcc) 2>/dev/null | head -1) $(nvcc --version 2>/dev/null | tail -1 || /usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1)"
    echo "cmake: $(cmake --version 2>/dev/null | head -1); ninja: $(ninja --version 2>/dev/null); cc: $(cc --version 2>/dev/null | head -1)"
    echo "node: $("$node" --version 2>&1); glibc: $(ldd --version 2>/dev/null | head -1)"
    echo "cores: $(nproc); memory: $(free -g 2>/dev/null | awk '/Mem:/ {print $2 " GiB"}')"
  } >"$out/facts.txt" 2>&1
  cat "$out/facts.txt"
  step "llama-server:build --cuda" "$budget" "$out/build.log" "$node" scripts/llama-server-build.mjs --cuda "$@"
  tail -1 "$out/build.log"
fi

if [ "$part" = check ] || [ "$part" = all ]; then
  check_started=$SECONDS
  step "NVML checks" $((budget / 3)) "$out/nvml-checks.log" "$node" dist/test/fixtures/gpu-checks.js --out "$out"
  cat "$out/nvml-checks.log"
  step "bench:pacing --gpu" $((budget - (SECONDS - check_started))) "$out/bench-gpu.log" "$node" dist/test/bench/pacing-bench.js --gpu ${BENCH_ARGS:-}
  [ -f bench-results/pacing-gpu.json ] && cp bench-results/pacing-gpu.json "$out/"
  tail -25 "$out/bench-gpu.log"
fi

if [ "$part" = resume ]; then
  step "bench:pacing --gpu --resume-cost" "$budget" "$out/resume-cost.log" "$node" dist/test/bench/pacing-bench.js --gpu --resume-cost
  [ -f bench-results/resume-cost-gpu.json ] && cp bench-results/resume-cost-gpu.json "$out/"
  tail -12 "$out/resume-cost.log"
fi

if [ "$part" = trace ]; then
  step "bench:pacing --gpu --trace" "$budget" "$out/trace.log" "$node" dist/test/bench/pacing-bench.js --gpu --scenarios 2:1 --modes gate,naive --measure-s 10 --trace "$out/trace-gpu.json" ${BENCH_ARGS:-}
  [ -f bench-results/pacing-gpu.json ] && cp bench-results/pacing-gpu.json "$out/pacing-gpu-trace-run.json"
  grep -E '^  (trace|    |2:1)' "$out/trace.log" | tail -30
fi

if [ "$part" = trace-lock ]; then
  step "bench:pacing --gpu --stop-method cuda-lock --trace" "$budget" "$out/trace-lock.log" "$node" dist/test/bench/pacing-bench.js --gpu --scenarios 2:1 --modes gate --measure-s 10 --stop-method cuda-lock --trace "$out/trace-gpu-lock.json" ${BENCH_ARGS:-}
  [ -f bench-results/pacing-gpu.json ] && cp bench-results/pacing-gpu.json "$out/pacing-gpu-trace-lock-run.json"
  grep -E '^  (trace|    |2:1)|gpu-share: ' "$out/trace-lock.log" | tail -20
fi

if [ "$part" = estimates ]; then
  step "planner estimates against NVML" "$budget" "$out/estimates.log" "$node" dist/test/fixtures/gpu-estimates.js --out "$out"
  tail -12 "$out/estimates.log"
fi

if [ "$part" = coop ]; then
  step "bench:pacing --gpu --engine builtin" "$budget" "$out/bench-gpu-builtin.log" "$node" dist/test/bench/pacing-bench.js --gpu --engine builtin ${BENCH_ARGS:-}
  [ -f bench-results/pacing-gpu-builtin.json ] && cp bench-results/pacing-gpu-builtin.json "$out/"
  tail -12 "$out/bench-gpu-builtin.log"
fi
exit $failed
