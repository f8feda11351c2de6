#!/usr/bin/env bash
# bench/gpu.sh — one prepared GPU benchmark of klear's own training and rollout code on a random-init
# model with Qwen's real vocabulary (tasks/models/qwen_tokenizer: 151,936 embedding rows, ChatML, two eos
# ids), sized for one lent NVIDIA H200 (≤ 10 min per command, 15 min of device time in all).
#
#   bash bench/gpu.sh                 # GPU: Qwen2.5-0.5B's shape, ~0.49B (hidden 896, 24 layers, 14 heads /
#                                     #      2 KV heads, ffn 4864, vocab 151936, tied embeddings), worst case
#                                     #      9 min
#   bash bench/gpu.sh --cpu-smoke     # CPU: the qwen3-tiny preset (tasks/models/presets.py), a few steps,
#                                     #      same code paths (KLEAR_GPU_BENCH_SMOKE=1 does the same); vLLM is
#                                     #      skipped when there is no GPU
#   bash bench/gpu.sh --rl-dist       # setup + rl_dist only: the distributed RL step in a call of its own
#   bash bench/gpu.sh --sft           # setup + the sft parts + sft_loss only (≈ 3 min on a GPU)
#   bash bench/gpu.sh --pretrained    # only the recipe on a pretrained base: `klear pipeline --base-model
#                                     #      $KLEAR_BENCH_BASE_MODEL (smollm2-135m-instruct) --scale
#                                     #      $KLEAR_BENCH_SCALE (0.5)`, base → SFT → RL held-out avg@k and
#                                     #      the stages' seconds (the pipeline's summary line); skipped with a
#                                     #      reason where klear cannot run (no typer/prefect) or the model
#                                     #      cannot be had (no Hub, no package index, no cached copy)
#   KLEAR_BENCH_TP=2 bash bench/gpu.sh --rl-dist   # the same with one vLLM engine per 2 GPUs (--tensor-parallel 2)
#
# Prints one JSON line per measurement ({"bench":"gpu","part":...,"status":"ok|skipped|timeout|error",...})
# and writes them all to bench/out/gpu.json (also $OUT/gpu.json when $OUT is set, as on the device machine),
# the parts' logs to bench/out/gpu.log. Parts, each its own process under its own time limit (GPU / smoke),
# so one that hangs or fails costs only its own slot; a global budget (GLOBAL_S = 570 s) caps them all:
#   setup    (60 s)  Qwen's tokenizer (built from dashscope's qwen.tiktoken ranks, a few seconds) + random
#                    model saved as an HF dir in fp32 like `klear model init`, + synthetic long-CoT SFT rows
#                    (.jsonl). Every part below pays the 151,936-wide lm_head (SFT's and RL's log-probs in
#                    chunks from the hidden states, rollout sampling's full logits per decode step)
#   sft     (110 s)  tasks.training.sft.train_sft (one process, bf16 autocast on fp32 weights + AdamW, packed
#                    seq_len 4096, 16 packs/step in micro-batches of 4): 3 warm-up steps, then 12 timed steps
#                    (wall time between on_step callbacks, CUDA-synchronised); stops before the final save.
#                    SFTConfig.logprob_kernel auto: Liger's fused linear cross-entropy where liger-kernel
#                    imports (below), else the chunked torch kernel; the line names the one it took
#   sft_varlen (110 s)  only when sft failed: the same on varlen attention (SFTConfig.attention; auto is
#                    FlexAttention on a GPU), so a FlexAttention failure leaves a figure to read
#   sft_chunked (110 s)  the same with logprob_kernel chunked: the kernel's share of the step, when sft took Liger's
#   sft_compiled (150 s)  the same with SFTConfig.compile (each decoder block under torch.compile; the warm-up
#                    steps pay the compilation)
#   sft_loss (60 s)  SFT's loss on one micro-batch (4 × 4096 tokens) of the setup model, bf16 autocast, forward +
#                    backward of the model: the one-shot cross-entropy over an fp32 copy of the full logits
#                    (train_sft's form until 2026-12-04) against tasks.training.sft_loss.summed_nll (label
#                    positions only, from the hidden states: the chunked kernel, and Liger's where it can run —
#                    under Triton's interpreter in --cpu-smoke), alternated: peak memory and seconds of each and
#                    their ratios
#   rollout (150 s)  tasks.generation.vllm_backend.VLLMGenerator (vLLM defaults on GPU: CUDA graphs, bf16,
#                    gpu_memory_utilization 0.5 as in RL): 32 prompts × n=8, temperature 1.0, top_p 1,
#                    max_tokens 1024 → generated tokens/s; then sync_weights(fp32 policy on the GPU) × 3 after
#                    one warm-up push → seconds per in-place weight sync. Without an importable vLLM it
#                    reports vllm_* as skipped and times train_rl's backend-"hf" engine instead (hf_rollout:
#                    16 prompts × 8, ≤ 512 tokens; its fixed-shape decode steps replayed as CUDA graphs, then
#                    the same call with the dynamic steps for the ratio, and graphs vs eager on a short call)
#   rl fp32  (80 s)  tasks.training.rl_update.update_policy, GPPO, 16 prompts × 8 rollouts (prompt 128, response
#                    384-1024 tokens, mixed rewards), 2 mini-batches, packed micro-batches of ≤ 16,384 tokens,
#                    gradient checkpointing and fused AdamW as train_rl on a GPU: 1 warm-up + 2 timed updates
#                    in fp32 (RLConfig.bf16=False); also the trainer peak `klear rl --dry-run` plans for it
#                    and measured / planned (target: within 15 %)
#   rl bf16  (60 s)  the same with RLConfig.bf16=True (bf16 autocast around each forward, fp32 weights; train_rl's
#                    GPU default)
#   rl bf16 varlen (60 s)  only when rl bf16 failed: the same on varlen attention
#   rl bf16 padded (60 s)  the same with packing off (one right-padded row per rollout: the reference layout)
#   profile  (90 s)  torch.profiler over one SFT step and one RL update (bf16): top operators by device time
#   rl_dist (240 s)  `klear rl --nproc <all GPUs> --strategy fsdp --backend vllm` on the setup model: 4 steps of
#                    16 prompts × 8 rollouts, max_tokens 1024, 2 mini-batches, micro-batches ≤ 16,384 tokens, zero-variance
#                    filter off (every rollout trained); the first step is a warm-up. From its metrics.jsonl:
#                    generation tokens/s (response_len × rollouts / t_generate_s), weight-sync seconds
#                    (t_sync_s), update MFU = 6·N·tokens / (t_update · GPUs · peak of that GPU type); t_update
#                    is t_update_s when logged, else t_step_s − t_generate_s − t_sync_s (grading included).
#                    Skipped, with one line saying why, without a CUDA device, vLLM, or a `klear rl` that
#                    takes --nproc/--strategy/--backend. After the parts above it gets what the global
#                    budget leaves; --rl-dist runs it right after setup
#
# MFU (model FLOPs utilisation), stated once for every part:
#   MFU = Σ_sequences (6·N·s + 6·L·d_attn·s²) / seconds / 989e12
#   N      = weights of every matmul: per layer q,k,v,o + gate,up,down (biases in), plus lm_head (= the
#            tied embedding, counted once); the embedding lookup and norms are not counted
#   s      = real tokens of a sequence (SFT: each packed example, padding excluded; RL: prompt + response)
#   L·d_attn·s² terms: causal self-attention, QKᵀ and AV over the lower triangle (2·L·d_attn·s² per pass),
#            d_attn = heads · head_dim = 896; ×3 for forward + backward
#   RL adds one no-grad forward (a third of the above) for every rollout outside the first mini-batch
#   (its π_old pass); 989 TFLOP/s = H200 SXM dense bf16 peak (datasheet; an 8k bf16 GEMM measured ~790 here)
# tokens_per_s counts real tokens; SFT also reports pack_slots_per_s (batch × seq_len: padding included, none
# of it computed since its micro-batches run as one unpadded row) and the response
# tokens/s that train_sft itself logs. fp32 RL MFU is still quoted against the bf16 peak.
#
# On the device machine: nothing of ours is installed there; its image's python3 (3.12, torch, transformers,
# pyarrow, fsspec, tensorboard, matplotlib) runs the repo from PYTHONPATH. Nor is dashscope: the ranks file
# (2.5 MB) travels with the call (`carry` below) and this script points KLEAR_QWEN_RANKS at it when the
# python cannot find dashscope. vLLM is NOT in that image and
# cannot travel (vllm 0.32.0's wheel is 327 MB; a call carries 64 MiB), so there the rollout part falls back
# to the HF engine unless a future image has vllm, and rl_dist is skipped (no vLLM; nor typer/prefect for
# `klear rl`). Device calls:
#   run(command="PYTHONUNBUFFERED=1 bash bench/gpu.sh", timeout_s=600,
#       carry=[".venv/lib/python3.11/site-packages/dashscope/resources/qwen.tiktoken",
#              ".venv/liger-cpu/liger_kernel"])
#   run(command="PYTHONUNBUFFERED=1 bash bench/gpu.sh --rl-dist", timeout_s=400, carry=[…the same…])
# Liger Kernel (the `gpu` extra) is not in that image either: `make liger-cpu` puts liger-kernel (8 MB) and
# Triton in .venv/liger-cpu, and the call carries liger_kernel alone (the image's CUDA torch brings Triton).
# Where the python cannot import liger_kernel, this script offers that copy: alone on a GPU (a folder of
# $WORK with a link to it, so a CPU machine's Triton never shadows the torch's own), with its Triton and
# TRITON_INTERPRET=1 to sft_loss in --cpu-smoke.
set -u -o pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

SMOKE=${KLEAR_GPU_BENCH_SMOKE:-0}
ONLY_RL_DIST=0
ONLY_SFT=0
ONLY_PRETRAINED=0
for arg in "$@"; do
  case "$arg" in
    --cpu-smoke|--smoke) SMOKE=1 ;;
    --rl-dist) ONLY_RL_DIST=1 ;;
    --sft) ONLY_SFT=1 ;;
    --pretrained) ONLY_PRETRAINED=1 ;;
    -h|--help) sed -n '2,97p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python3
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export PREFECT_LOGGING_LEVEL=WARNING VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-WARNING}
# Qwen's ranks (tasks/models/qwen_ranks.py): the installed dashscope's, else a copy carried into .venv
if [ -z "${KLEAR_QWEN_RANKS:-}" ] && ! "$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("dashscope") is None)' 2>/dev/null; then
  for f in .venv/lib/python*/site-packages/dashscope/resources/qwen.tiktoken; do
    [ -f "$f" ] && export KLEAR_QWEN_RANKS="$REPO/$f" && break
  done
fi

LIGER_COPY=
if ! "$PY" -c 'import liger_kernel' 2>/dev/null && [ -d .venv/liger-cpu/liger_kernel ]; then
  LIGER_COPY="$REPO/.venv/liger-cpu"
fi

if [ "$SMOKE" = 1 ]; then
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
  FLAG=--smoke
  WORK=${KLEAR_GPU_BENCH_WORK:-/tmp/klear-gpu-bench-smoke}
  GLOBAL_S=1000; L_SETUP=120; L_SFT=150; L_SFTC=240; L_SFTL=120; L_ROLLOUT=240; L_RL=120; L_RLB=120; L_PROF=120; L_RLD=240
else
  FLAG=
  WORK=${KLEAR_GPU_BENCH_WORK:-/tmp/klear-gpu-bench}
  GLOBAL_S=570; L_SETUP=60; L_SFT=110; L_SFTC=150; L_SFTL=60; L_ROLLOUT=150; L_RL=80; L_RLB=60; L_PROF=90; L_RLD=240
fi
rm -rf "$WORK"; mkdir -p "$WORK" bench/out
SFTL_ENV=()
if [ -n "$LIGER_COPY" ] && [ "$SMOKE" = 1 ]; then
  SFTL_ENV=(TRITON_INTERPRET=1 "PYTHONPATH=$LIGER_COPY:$PYTHONPATH")
elif [ -n "$LIGER_COPY" ]; then
  mkdir -p "$WORK/liger" && ln -s "$LIGER_COPY/liger_kernel" "$WORK/liger/liger_kernel"
  export PYTHONPATH="$PYTHONPATH:$WORK/liger"
fi
LOG=bench/out/gpu.log; : >"$LOG"
RESULTS="$WORK/results.jsonl"; : >"$RESULTS"
START=$(date +%s)
echo "bench/gpu.sh: python=$PY smoke=$SMOKE work=$WORK" >&2
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader >&2 || true
fi

json_line() {  # part status reason → one JSON line on stdout and in results.jsonl
  local line
  line=$("$PY" -c 'import json,sys; print(json.dumps({"bench":"gpu","part":sys.argv[1],"status":sys.argv[2],"reason":sys.argv[3]}))' "$1" "$2" "$3")
  echo "$line"; echo "$line" >>"$RESULTS"
}

SETUP_OK=1
PART_ENV=()  # VAR=value words for the next part's process (env)
run_part() {  # name limit_s args...  → runs one part under min(limit, budget left)
  local name=$1 limit=$2; shift 2
  local left=$(( GLOBAL_S - ($(date +%s) - START) ))
  if [ "$name" != setup ] && [ "$SETUP_OK" != 1 ]; then json_line "$name" skipped "setup failed"; return; fi
  if [ "$left" -lt 10 ]; then json_line "$name" skipped "global budget of ${GLOBAL_S}s spent"; return; fi
  [ "$left" -lt "$limit" ] && limit=$left
  local t0 rc
  t0=$(date +%s)
  echo "== $name (limit ${limit}s)" >>"$LOG"
  # JSON lines come back on stdout; everything else goes to the log
  timeout -k 10 "$limit" env ${PART_ENV[@]+"${PART_ENV[@]}"} "$PY" bench/gpu_bench.py "$@" --work "$WORK" $FLAG 2>>"$LOG" | grep '^{'
  rc=${PIPESTATUS[0]}
  echo "== $name rc=$rc in $(( $(date +%s) - t0 ))s" >>"$LOG"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    json_line "$name" timeout "killed after ${limit}s (results it printed before stay)"
  elif [ "$rc" != 0 ]; then
    json_line "$name" error "exit $rc: $(grep -v '^\s*$' "$LOG" | tail -n 3 | tr '\n' ' ' | cut -c1-400)"
  fi
  if [ "$name" = setup ] && { [ "$rc" != 0 ] || ! grep -q '"part": "setup", "status": "ok"' "$RESULTS"; }; then
    SETUP_OK=0
  fi
  if [ "$rc" != 0 ]; then tail -n 25 "$LOG" >&2; fi
}

part_ok() {  # name → whether that part printed an ok line
  grep -q "\"part\": \"$1\", \"status\": \"ok\"" "$RESULTS"
}

run_pretrained_pipeline() {  # the recipe end to end on a pretrained base, its summary line as the result
  local base=${KLEAR_BENCH_BASE_MODEL:-smollm2-135m-instruct} scale=${KLEAR_BENCH_SCALE:-0.5} rc summary
  if ! "$PY" -c 'import typer, prefect' 2>/dev/null; then
    json_line pretrained_pipeline skipped "this python has no typer/prefect: klear pipeline cannot run"; return
  fi
  echo "== pretrained_pipeline ($base, scale $scale, limit ${GLOBAL_S}s)" >>"$LOG"
  timeout -k 10 "$GLOBAL_S" "$PY" -m flows.cli pipeline --base-model "$base" --scale "$scale" \
    --store "$WORK/pipeline-store" >"$WORK/pipeline.out" 2>>"$LOG"
  rc=$?
  summary=$(grep '^{' "$WORK/pipeline.out" | tail -n 1)
  if [ "$rc" = 0 ] && [ -n "$summary" ]; then
    line=$("$PY" -c 'import json,sys; print(json.dumps({"bench":"gpu","part":"pretrained_pipeline","status":"ok","base_model":sys.argv[1],"scale":float(sys.argv[2]),"summary":json.loads(sys.argv[3])}))' "$base" "$scale" "$summary")
    echo "$line"; echo "$line" >>"$RESULTS"
  else
    json_line pretrained_pipeline error "exit $rc: $(grep -v '^\s*$' "$LOG" | tail -n 2 | tr '\n' ' ' | cut -c1-400)"
  fi
}

if [ "$ONLY_PRETRAINED" = 1 ]; then
  run_pretrained_pipeline
  [ -n "${OUT:-}" ] && cp "$LOG" "$OUT/gpu.log" 2>/dev/null && cp "$RESULTS" "$OUT/gpu.json" 2>/dev/null
  exit 0
fi
run_part setup "$L_SETUP" setup
if [ "$ONLY_RL_DIST" != 1 ]; then
  run_part sft "$L_SFT" sft
  # FlexAttention (auto's kernel on a GPU) failing would cost every SFT and RL figure: then the same part
  # once more on varlen attention (causal SDPA per document), so the run still measures the rest
  part_ok sft || run_part sft_varlen "$L_SFT" sft --attention varlen
  run_part sft_chunked "$L_SFT" sft --kernel chunked
  run_part sft_compiled "$L_SFTC" sft --compile
  PART_ENV=(${SFTL_ENV[@]+"${SFTL_ENV[@]}"})
  run_part sft_loss "$L_SFTL" sft_loss
  PART_ENV=()
fi
if [ "$ONLY_RL_DIST" != 1 ] && [ "$ONLY_SFT" != 1 ]; then
  run_part rollout "$L_ROLLOUT" rollout
  run_part rl_update_fp32 "$L_RL" rl --precision fp32
  run_part rl_update_bf16 "$L_RLB" rl --precision bf16
  part_ok rl_update_bf16 || run_part rl_update_bf16_varlen "$L_RLB" rl --precision bf16 --attention varlen
  run_part rl_update_bf16_padded "$L_RLB" rl --precision bf16 --layout padded
  run_part profile "$L_PROF" profile
fi
[ "$ONLY_SFT" != 1 ] && run_part rl_dist "$L_RLD" rl_dist

"$PY" bench/gpu_bench.py report --work "$WORK" $FLAG --started "$START" 2>&1 | tail -n 1 >&2
[ -n "${OUT:-}" ] && cp "$LOG" "$OUT/gpu.log" 2>/dev/null
echo "bench/gpu.sh: done in $(( $(date +%s) - START ))s" >&2
exit 0
