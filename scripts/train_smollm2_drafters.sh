#!/usr/bin/env bash
# Train and export the drafters shipped for SmolLM2-135M-Instruct, as they were made.
#
#   scripts/train_smollm2_drafters.sh [TARGET_DIR] [RUN_DIR] [STAGE...]
#
# TARGET_DIR: the HF checkpoint (`specpath convert SmolLM2-135M-Instruct.Q4_1.gguf DIR`; default
# the named model smollm2-135m). RUN_DIR: data, logs, resume files (default runs/smollm2). STAGES:
# data, more, eagle3, draft, mtp, dspark, dflash, pard, peagle, mtp60, dspark60, dflash60 (default: all,
# in that order). Two jobs at a
# time, one torch thread each, each in its own session (setsid: with the kernel's autogroup
# scheduling a job's CPU share is set per session, not by nice); NICE=10 to run them niced.
# Every stage resumes from its own files when restarted. Drafters are exported to
# RUN_DIR/export/NAME (fp16); the shipped copies under builtin_methods/ are those that beat the
# previous ones (docs/benchmarks.md). Evaluate with benchmarks/smollm2_drafters.py (see the docs).
#
# Round 1 (stage data -> RUN_DIR/data/all, 2026-12-01 14:00-14:31, two processes): shard A
# (seed 1) = the held-out windows (16 code slices + 16 chat instructions from the held-out
# stdlib files) and the target's continuations of the first 3 chunks (144) of 480 shuffled
# training prompts (240 stdlib code slices + 240 chat instructions about stdlib functions,
# ChatML), plus 400 windows of plain stdlib text; shard B (seed 2) = 16 held-out everyday chat
# requests and the continuations of the first 6 chunks (288) of 480 training ones
# (target_text.GENERAL_TASKS). bf16, greedy/greedy/T=0.7, up to 192 new tokens, EOS honoured;
# 256-token windows: 42 held out + 759 training (194k tokens); taps 1, 14, 26 (EAGLE-3 / DFlash /
# DSpark) and 29 (the last layer: targets, MTP, draft model) and the target's top-8 next tokens.
# draft was trained on it (and round 1's eagle3 and mtp, since replaced).
#
# Round 2 (stage more -> RUN_DIR/data/more = round 1 + shards C and D, 2026-12-01 16:49-17:27,
# two processes, 96 sequences per batch): shard C (seed 3) = continuations of the first 18
# chunks (1,728) of 3,000 everyday requests from the wider pool (target_text.WIDER_GENERAL_TASKS;
# its held-out rule is the first pool's, so the 42 held-out windows stay held out); shard D
# (seed 4) = the first 9 chunks (864) of 1,200 stdlib code/chat prompts, plus 400 windows of
# plain stdlib text. 1,316 + 1,322 new windows: 42 held out + 3,397 training (870k tokens).
# eagle3 (60 min), dspark (30 min), dflash (20 min) and mtp (15 min) were trained on it, with
# --bf16 (autocast; ~1.8x faster steps), 2026-12-01 17:27-18:35: eagle3 beside dspark then
# dflash, then mtp alone. draft (16 min) is still round 1's. Shipped: all five.
# (--max-chunks is the time budget: generation ran at ~200 tok/s (C) and ~100 tok/s (D, longer
# prompts) per process, features at ~450 tok/s per process.)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
T=${1:-smollm2-135m}
R=${2:-runs/smollm2}
shift $(( $# > 2 ? 2 : $# )) || true
STAGES=${*:-data more eagle3 draft mtp dspark dflash pard peagle mtp60 dspark60 dflash60}
export OMP_NUM_THREADS=1
run() { setsid nice -n "${NICE:-0}" python -m "$@" < /dev/null; }
has() { [[ " $STAGES " == *" $1 "* ]]; }
mkdir -p "$R/logs"
X=$R/export
COMMON=(--target "$T" --data "$R/data/all" --train-vocab 4096 --batch 4 --seed 0 --threads 1 --resume --warmup 10)
MORE=(--target "$T" --data "$R/data/more" --train-vocab 4096 --batch 8 --seed 0 --threads 1 --resume --warmup 20 --bf16 \
  --eval-every 300)

if has data; then
  run specpath_train.target_text --target "$T" --out "$R/data/shardA" --layers 1 14 26 29 --code 240 --chat 240 \
    --heldout-code 16 --heldout-chat 16 --raw-windows 400 --max-chunks 3 --chunk 48 --max-num-seqs 48 --seed 1 \
    --threads 1 > "$R/logs/data_shardA.log" 2>&1 &
  run specpath_train.target_text --target "$T" --out "$R/data/shardB" --layers 1 14 26 29 --code 0 --chat 0 \
    --heldout-code 0 --heldout-chat 0 --general 480 --heldout-general 16 --max-chunks 6 --chunk 48 --max-num-seqs 48 \
    --seed 2 --threads 1 > "$R/logs/data_shardB.log" 2>&1 &
  wait
  python -c "import sys; from specpath_train.target_text import merge_datasets; merge_datasets(sys.argv[1:3], sys.argv[3])" \
    "$R/data/shardA" "$R/data/shardB" "$R/data/all"
fi
if has more; then
  run specpath_train.target_text --target "$T" --out "$R/data/shardC" --layers 1 14 26 29 --code 0 --chat 0 \
    --heldout-code 0 --heldout-chat 0 --general 3000 --heldout-general 0 --wider-general --max-chunks 18 --chunk 96 \
    --max-num-seqs 96 --seed 3 --threads 1 > "$R/logs/data_shardC.log" 2>&1 &
  run specpath_train.target_text --target "$T" --out "$R/data/shardD" --layers 1 14 26 29 --code 600 --chat 600 \
    --heldout-code 0 --heldout-chat 0 --raw-windows 400 --max-chunks 9 --chunk 96 --max-num-seqs 96 --seed 4 \
    --threads 1 > "$R/logs/data_shardD.log" 2>&1 &
  wait
  python -c "import sys; from specpath_train.target_text import merge_datasets; merge_datasets(sys.argv[1:5], sys.argv[5])" \
    "$R/data/shardA" "$R/data/shardB" "$R/data/shardC" "$R/data/shardD" "$R/data/more"
fi
if has eagle3; then  # EAGLE-3: 1 layer, draft vocabulary = the 4,096 most frequent training ids, TTT over 3 depths
  run specpath_train.recipes.eagle3 "${MORE[@]}" --out "$R/eagle3" --draft-vocab 4096 --ttt-steps 3 --parallel-depths 0 \
    --lr 2e-3 --minutes 60 --export "$X/eagle3" > "$R/logs/eagle3.log" 2>&1 &
fi
(  # beside EAGLE-3, one after the other
  if has draft; then  # 2 layers copied from the target's first two, the target's embedding borrowed at load
    run specpath_train.recipes.draft_model_shared "${COMMON[@]}" --out "$R/draft" --init-layers 0 1 --lr 1e-3 --minutes 16 \
      --eval-every 240 --export "$X/draft" > "$R/logs/draft.log" 2>&1
  fi
  if has mtp; then  # one MTP module reused for every draft (chain depths 3), target embedding and head shared
    run specpath_train.recipes.mtp "${MORE[@]}" --modules 1 --out "$R/mtp1" --depth 3 --lr 2e-3 --minutes 15 \
      --export "$X/mtp1" > "$R/logs/mtp.log" 2>&1
  fi
  if has dspark; then  # DSpark: the DFlash backbone (1 layer, taps 1/14/26, K=4 blocks) + Markov head rank 16, soft CE
    run specpath_train.recipes.dspark "${MORE[@]}" --out "$R/dspark" --k 4 --layers 1 --tap-ids 1 14 26 --anchors 16 \
      --markov-rank 16 --soft-ce --loss-weights 1.0 0.9 1.0 --lr 2e-3 --minutes 30 --export "$X/dspark" \
      > "$R/logs/dspark.log" 2>&1
  fi
  if has dflash; then  # DFlash: 1 layer, taps 1/14/26, K=4 blocks
    run specpath_train.recipes.dflash "${MORE[@]}" --out "$R/dflash" --k 4 --layers 1 --tap-ids 1 14 26 --anchors 16 \
      --lr 2e-3 --minutes 20 --export "$X/dflash" > "$R/logs/dflash.log" 2>&1
  fi
) &
wait
# Round 3 (2026-12-01 19:24-20:04, beside each other). pard: the draft above (16 min) fine-tuned
# 40 min on round 2's text with PARD's mask copies (depths 2-4 from the mask token 16,
# <empty_output>, which the target's text never holds) and the autoregressive depth 1 kept, so
# one checkpoint serves plain and parallel drafting. peagle: P-EAGLE measured, not shipped
# (docs/benchmarks.md): the chain head above fine-tuned 20 min with the mask slots (a first try
# training only the mask parameters, --train-only mask, stayed at ~5% agreement at depths 1-3).
if has pard; then
  run specpath_train.recipes.draft_model_shared --target "$T" --data "$R/data/more" --out "$R/pard" --init "$X/draft" \
    --pard-depth 3 --pard-token 16 --train-vocab 4096 --batch 4 --minutes 40 --threads 1 --bf16 --warmup 20 \
    --eval-every 300 --lr 5e-4 --seed 0 --resume --export "$X/pard" > "$R/logs/pard.log" 2>&1 &
fi
if has peagle; then
  run specpath_train.recipes.eagle3 "${MORE[@]}" --out "$R/peagle" --draft-vocab 4096 --ttt-steps 1 --parallel-depths 4 \
    --parallel-weight 1.0 --init "$X/eagle3" --lr 1e-3 --minutes 20 --export "$X/peagle" > "$R/logs/peagle.log" 2>&1 &
fi
wait
# Round 5 (2026-12-02 00:53-01:38, one thread; the test suite ran beside it for 6 of those minutes). mtp60: the MTP module of
# stage mtp resumed from its own resume file (RUN_DIR/mtp1/resume.pt, 15 of 60 minutes spent) to
# 60 minutes in all; its held-out agreement was still rising at 15 minutes (0.347 / 0.416 / 0.459
# at 5 / 10 / 15). The cosine schedule is read at elapsed / budget, so the learning rate restarts
# near its peak at 25% and decays to zero at 60 minutes.
if has mtp60; then
  run specpath_train.recipes.mtp "${MORE[@]}" --modules 1 --out "$R/mtp1" --depth 3 --lr 2e-3 --minutes 60 \
    --export "$X/mtp1" > "$R/logs/mtp60.log" 2>&1
fi
# dspark60 / dflash60 (2026-12-02 02:15-02:45 / 02:15-02:55, beside each other, one thread each):
# the DSpark and DFlash drafters of stages dspark and dflash resumed the same way to 60 minutes.
if has dspark60; then
  run specpath_train.recipes.dspark "${MORE[@]}" --out "$R/dspark" --k 4 --layers 1 --tap-ids 1 14 26 --anchors 16 \
    --markov-rank 16 --soft-ce --loss-weights 1.0 0.9 1.0 --lr 2e-3 --minutes 60 --export "$X/dspark" \
    > "$R/logs/dspark60.log" 2>&1 &
fi
if has dflash60; then
  run specpath_train.recipes.dflash "${MORE[@]}" --out "$R/dflash" --k 4 --layers 1 --tap-ids 1 14 26 --anchors 16 \
    --lr 2e-3 --minutes 60 --export "$X/dflash" > "$R/logs/dflash60.log" 2>&1 &
fi
wait
