#!/usr/bin/env bash
# Train the drafters shipped for SmolLM2-135M-Instruct with `specpath train` (docs/train.md).
#
#   scripts/train_smollm2_drafters.sh [TARGET] [RUN_DIR] [METHOD...]
#
# TARGET: the named model smollm2-135m (default), its GGUF file or an HF checkpoint directory.
# RUN_DIR: one output directory per method, RUN_DIR/<method> (the checkpoint, metrics.json and
# run/ with the resume state), and RUN_DIR/generations: the target's responses, generated once
# and shared by every method (only the captured layers differ). METHODS: eagle3 draft_model mtp
# dspark dflash (default: all, two at a time, one torch thread each, each in its own session:
# with the kernel's autogroup scheduling a job's CPU share is set per session, not by nice;
# NICE=10 runs them niced). Every command resumes where it stopped when the script is run again.
#
# The budgets and recipe settings are those of the shipped drafters (eagle3 60 min; draft_model
# 16; mtp, dspark, dflash 60; one draft layer, K = 4 blocks, a 4,096-id training vocabulary; see
# specpath_train.methods). The data is the built-in corpus answered by the target (3,000 training
# prompts: stdlib code to continue, chat about stdlib functions, everyday chat requests; 192 new
# tokens each, greedy). The shipped checkpoints themselves were made on 2026-12-01/02 by the
# recipe modules before this command existed (their config.json records each command line; the
# data shards are described in this file's history), so a drafter trained here is comparable,
# not byte-identical. PARD and P-EAGLE (fine-tunes of the draft model and the EAGLE-3 head with
# mask slots) have no `specpath train` method yet.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
T=${1:-smollm2-135m}
R=${2:-runs/smollm2}
shift $(( $# > 2 ? 2 : $# )) || true
METHODS=${*:-eagle3 draft_model mtp dspark dflash}
export OMP_NUM_THREADS=1
COMMON=(--target "$T" --prompts 3000 --max-new-tokens 192 --window 256 --seed 0 --threads 1 --batch 8
        --generations "$R/generations" --resume --no-progress)
mkdir -p "$R/logs"
has() { [[ " $METHODS " == *" $1 "* ]]; }
train() {  # METHOD MINUTES: one run, logged to RUN_DIR/logs/METHOD.log
  setsid nice -n "${NICE:-0}" specpath train "$1" --out "$R/$1" --minutes "$2" "${COMMON[@]}" \
    < /dev/null > "$R/logs/$1.log" 2>&1
}

declare -A MINUTES=([eagle3]=60 [draft_model]=16 [mtp]=60 [dspark]=60 [dflash]=60)
(  # EAGLE-3 on one core
  if has eagle3; then train eagle3 "${MINUTES[eagle3]}"; fi
) &
(  # beside it, the others one after the other (a chunk of responses one run is writing, the other waits for)
  for m in draft_model mtp dspark dflash; do
    if has "$m"; then train "$m" "${MINUTES[$m]}"; fi
  done
) &
wait
