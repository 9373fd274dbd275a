#!/usr/bin/env bash
# Train and export the drafters shipped for SmolLM2-135M-Instruct, as they were made.
#
#   scripts/train_smollm2_drafters.sh [TARGET_DIR] [RUN_DIR] [STAGE...]
#
# TARGET_DIR: the HF checkpoint (`specpath convert SmolLM2-135M-Instruct.Q4_1.gguf DIR`; default
# /work/models/smollm2-135m). RUN_DIR: data, logs, resume files (default runs/smollm2). STAGES:
# data, eagle3, draft, mtp, dflash, dspark (default: all, in that order). Two jobs at a time, one
# torch thread each, nice 10; every stage resumes from its own files when restarted.
#
# Data (two processes in parallel): shard 0 = the held-out windows (32 prompts from the held-out
# stdlib files: 16 code slices, 16 chat instructions); shard 1 (seed 1) = the target's
# continuations of the first chunk (50) of 200 shuffled training prompts (100 stdlib code slices +
# 100 chat instructions made from stdlib functions, ChatML template) plus 32 windows of plain
# stdlib text. bf16, greedy/greedy/T=0.7, up to 192 new tokens, EOS honoured; windows of 256
# tokens; taps 1, 14, 26 (EAGLE-3 / DFlash / DSpark) and 29 (the last layer: EAGLE-3 targets, MTP,
# draft model) and the target's top-8 next tokens. (Sized by the shared 2-core machine: at ~10%
# of a core per job the target ran at 10-16 tok/s generating and ~40 tok/s over windows.)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
T=${1:-/work/models/smollm2-135m}
R=${2:-runs/smollm2}
shift $(( $# > 2 ? 2 : $# )) || true
STAGES=${*:-data eagle3 draft mtp dflash dspark}
export OMP_NUM_THREADS=1
run() { nice -n 10 python -m "$@"; }
has() { [[ " $STAGES " == *" $1 "* ]]; }
mkdir -p "$R/logs"
EAGLE3=builtin_methods/eagle3/specpath_eagle3/heads/eagle3-smollm2
DRAFT=builtin_methods/draft_model/specpath_draft_model/checkpoints/smollm2-shared
# MTP and DFlash are not shipped for SmolLM2 (docs/benchmarks.md: tau <= 1.1); a retrained one
# exported here becomes the default only with a ShippedCheckpoint row in its config.
MTP=builtin_methods/mtp/specpath_mtp/checkpoints/mtp1-smollm2
DFLASH=builtin_methods/dflash/specpath_dflash/checkpoints/dflash-smollm2
DSPARK=builtin_methods/dspark/specpath_dspark/checkpoints/dspark-smollm2

if has data; then
  run specpath_drafting.target_text --target "$T" --out "$R/data/shard0" --layers 1 14 26 29 --code 0 --chat 0 \
    --heldout-code 16 --heldout-chat 16 --chunk 50 --max-num-seqs 32 --seed 0 --threads 1 > "$R/logs/data_shard0.log" 2>&1 &
  run specpath_drafting.target_text --target "$T" --out "$R/data/shard1" --layers 1 14 26 29 --code 100 --chat 100 \
    --max-chunks 1 --heldout-code 0 --heldout-chat 0 --raw-windows 32 --chunk 50 --max-num-seqs 32 --seed 1 \
    --threads 1 > "$R/logs/data_shard1.log" 2>&1 &
  wait
  python -c "import sys; from specpath_drafting.target_text import merge_datasets; merge_datasets(sys.argv[1:3], sys.argv[3])" \
    "$R/data/shard0" "$R/data/shard1" "$R/data/all"
fi
D=$R/data/all
if has eagle3; then  # EAGLE-3: 1 layer, 4,096-token draft vocabulary, training-time test over 2 depths
  run specpath_eagle3.train_eagle3 --target "$T" --data "$D" --out "$R/eagle3" --draft-vocab 4096 --vocab-corpus 3000 --train-vocab 4096 \
    --ttt-steps 2 --parallel-depths 0 --batch 4 --lr 2e-3 --minutes 14 --seed 0 --threads 1 --resume --warmup 10 --eval-every 100000 \
    --export $EAGLE3 > "$R/logs/eagle3.log" 2>&1 &
fi
if has draft; then  # 2 layers copied from the target's first two, the target's embedding borrowed at load
  run specpath_draft_model.train_shared --target "$T" --data "$D" --out "$R/draft" --init-layers 0 1 \
    --vocab-corpus 3000 --train-vocab 4096 --batch 4 --lr 1e-3 --minutes 12 --seed 0 --threads 1 --resume --warmup 10 --eval-every 100000 \
    --export $DRAFT > "$R/logs/draft.log" 2>&1 &
fi
wait
if has mtp; then  # one MTP module reused for every draft (chain depths 3), target embedding and head shared
  run specpath_mtp.train_mtp --modules 1 --target "$T" --data "$D" --out "$R/mtp1" --vocab-corpus 3000 --train-vocab 4096 --depth 3 \
    --batch 4 --lr 2e-3 --minutes 12 --seed 0 --threads 1 --resume --warmup 10 --eval-every 100000 --export $MTP > "$R/logs/mtp.log" 2>&1 &
fi
if has dflash; then  # DFlash: 1 layer, taps 1/14/26, K=4 blocks
  run specpath_dflash.train_dflash --target "$T" --data "$D" --out "$R/dflash" --vocab-corpus 3000 --train-vocab 4096 --k 4 --layers 1 \
    --tap-ids 1 14 26 --anchors 16 --batch 4 --lr 2e-3 --minutes 12 --seed 0 --threads 1 --resume --warmup 10 --eval-every 100000 \
    --export $DFLASH > "$R/logs/dflash.log" 2>&1 &
fi
wait
if has dspark; then  # DSpark: the DFlash backbone + Markov head rank 16 (2 x 49,152 x 16), soft CE
  run specpath_dspark.train_dspark --target "$T" --data "$D" --out "$R/dspark" --vocab-corpus 3000 --train-vocab 4096 --k 4 --layers 1 \
    --tap-ids 1 14 26 --anchors 16 --markov-rank 16 --soft-ce --loss-weights 1.0 0.9 1.0 --batch 4 --lr 2e-3 \
    --minutes 10 --seed 0 --threads 1 --resume --warmup 10 --eval-every 100000 --export $DSPARK > "$R/logs/dspark.log" 2>&1
fi
