#!/usr/bin/env bash
# Train the drafters shipped for SmolLM2-135M-Instruct with `specpath train` (docs/train.md).
#
#   scripts/train_smollm2_drafters.sh [TARGET] [RUN_DIR] [RUN...]
#
# TARGET: the named model smollm2-135m (default), its GGUF file or an HF checkpoint directory.
# RUN_DIR: one output directory per run, RUN_DIR/<run> (the checkpoint, metrics.json and run/
# with the resume state), and RUN_DIR/generations: the target's responses, generated once and
# shared by every run (only the captured layers differ). RUNS: eagle3 p-eagle draft_model pard
# mtp dspark dflash (default: all, in two lanes of one torch thread each, each run in its own
# session: with the kernel's autogroup scheduling a job's CPU share is set per session, not by
# nice; NICE=10 runs them niced). Every command resumes where it stopped when the script is run
# again.
#
# The budgets and recipe settings are those of the shipped drafters (eagle3 60 min; draft_model
# 16; mtp, dspark, dflash 60; one draft layer, K = 4 blocks, a 4,096-id training vocabulary; see
# specpath_train.methods). pard: the draft_model run fine-tuned 40 minutes as PARD (`--variant
# pard --from`: 3 mask copies for drafts 2-4 beside the autoregressive objective, mask token
# <empty_output>): that fine-tune is the shipped draft_model checkpoint smollm2-shared, which
# serves both shapes. p-eagle: the eagle3 head fine-tuned 20 minutes with P-EAGLE's mask slots
# (`--variant p-eagle --from`), the budget of the SmolLM2 P-EAGLE head that was measured and
# not shipped (docs/benchmarks-history.md; the shipped P-EAGLE head is the embedded target's).
# The data is the built-in corpus answered by the target (3,000 training prompts: stdlib code to
# continue, chat about stdlib functions, everyday chat requests; 192 new tokens each, greedy).
# The shipped checkpoints themselves were made on 2026-12-01/02 by the recipe modules before this
# command existed (their config.json records each command line; the data shards are described in
# this file's history), so a drafter trained here is comparable, not byte-identical.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
T=${1:-smollm2-135m}
R=${2:-runs/smollm2}
shift $(( $# > 2 ? 2 : $# )) || true
RUNS=${*:-eagle3 p-eagle draft_model pard mtp dspark dflash}
export OMP_NUM_THREADS=1
COMMON=(--target "$T" --prompts 3000 --max-new-tokens 192 --window 256 --seed 0 --threads 1 --batch 8
        --generations "$R/generations" --resume --no-progress)
mkdir -p "$R/logs"
has() { [[ " $RUNS " == *" $1 "* ]]; }
train() {  # RUN MINUTES METHOD [FLAGS...]: one run into RUN_DIR/RUN, logged to RUN_DIR/logs/RUN.log
  local run=$1 minutes=$2 method=$3
  shift 3
  setsid nice -n "${NICE:-0}" specpath train "$method" "$@" --out "$R/$run" --minutes "$minutes" "${COMMON[@]}" \
    < /dev/null > "$R/logs/$run.log" 2>&1
}

declare -A MINUTES=([eagle3]=60 [p-eagle]=20 [draft_model]=16 [pard]=40 [mtp]=60 [dspark]=60 [dflash]=60)
lane() {  # RUN...: one after the other (a chunk of responses one run is writing, the other lane waits for)
  for run in "$@"; do
    has "$run" || continue
    case $run in
      p-eagle) train p-eagle "${MINUTES[$run]}" eagle3 --variant p-eagle --from "$R/eagle3" ;;
      pard) train pard "${MINUTES[$run]}" draft_model --variant pard --from "$R/draft_model" ;;
      *) train "$run" "${MINUTES[$run]}" "$run" ;;
    esac
  done
}
lane eagle3 p-eagle dspark &          # 140 minutes
lane draft_model pard mtp dflash &    # 176 minutes
wait
