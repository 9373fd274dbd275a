#!/usr/bin/env bash
# Trains the three shipped drafts, one job at a time (one torch thread, nice 5):
#   train_shipped.sh [TARGET] [OUT] [INIT] [MINUTES]
# TARGET: the target checkpoint (default: the embedded default model); OUT: where data, drafts and
# logs go (default runs/draft_model); INIT: a folder with earlier ar/ and bpe/ drafts to continue
# from (e.g. trained against an interim export of the target); MINUTES per draft (default 8).
# The target's text is generated first, then the autoregressive draft, the BPE draft, and PARD
# from the new autoregressive draft. Copy OUT/{ar,pard,bpe} into
# specpath_draft_model/checkpoints/ once checked.
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${1:-engine/specpath_engine/assets/default_model}
out=${2:-runs/draft_model}
init=${3:-}
minutes=${4:-8}
export SPECPATH_TRAIN_THREADS=1
mkdir -p "$out"
train() { nice -n 5 python3 -m specpath_train.recipes.draft_model "$@"; }
from() { [ -n "$init" ] && echo "--init $init/$1" || true; }
train generate --target "$target" --out "$out/target_text.pt" --seed 0
train ar --data "$out/target_text.pt" --out "$out/ar" --log "$out/ar.log" --minutes "$minutes" --seed 0 $(from ar)
train bpe --data "$out/target_text.pt" --out "$out/bpe" --log "$out/bpe.log" --minutes "$minutes" --seed 0 $(from bpe)
train pard --init "$out/ar" --data "$out/target_text.pt" --out "$out/pard" --log "$out/pard.log" \
  --context 96 --depth 7 --minutes "$minutes" --seed 0
