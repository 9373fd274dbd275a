#!/usr/bin/env bash
# Trains the three shipped drafts against the embedded default model, as committed:
# target text (generate), then the autoregressive and BPE drafts side by side, then PARD from the
# autoregressive draft. One torch thread each, nice 5, 10 minutes per draft; logs and results in
# runs/draft_model/. Copy the results into specpath_draft_model/checkpoints/ once checked.
set -euo pipefail
cd "$(dirname "$0")/../.."
export SPECPATH_TRAIN_THREADS=1
out=runs/draft_model
mkdir -p "$out"
train() { nice -n 5 python3 -m specpath_draft_model.train "$@"; }
train generate --out "$out/target_text.pt" --seed 0
train ar --data "$out/target_text.pt" --out "$out/ar" --log "$out/ar.log" --minutes 10 --seed 0 > "$out/ar.out" 2>&1 &
train bpe --data "$out/target_text.pt" --out "$out/bpe" --log "$out/bpe.log" --minutes 10 --seed 0 > "$out/bpe.out" 2>&1 &
wait
train pard --init "$out/ar" --data "$out/target_text.pt" --out "$out/pard" --log "$out/pard.log" \
  --context 96 --depth 7 --minutes 10 --seed 0
