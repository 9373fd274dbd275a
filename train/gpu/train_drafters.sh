#!/usr/bin/env bash
# Self-distilled data and four drafters (EAGLE-3, MTP, DFlash, DSpark) for SmolLM2-135M on one GPU,
# inside one command's time limit, the checkpoints left in $OUT. Run from the repository root:
#
#   OUT=/some/dir BUDGET=540 train/gpu/train_drafters.sh TARGET.gguf TEMPLATE_ROWS.jsonl.gz [N_SELF]
#
# TEMPLATE_ROWS: the wide corpus's model-free prompts, drawn beforehand on a CPU machine (see
# docs/train.md); N_SELF: how many self-instructed requests the target adds on the GPU. A checkpoint
# directory instead of the .gguf is used as it is (train/gpu/smoke.sh: a random small target).
# The responses are `specpath train --data-only` runs over slices of the prompts (as many as the
# budget allows), merged into one live data directory; the four trainings read it side by side
# (train/gpu/train_on.py: the recipes `specpath train` runs), each for what is left of BUDGET
# seconds. Wheels the GPU image lacks come from $WHL (default .gpu/whl) when that folder exists.
set -uo pipefail
TARGET=${1:?target .gguf or checkpoint directory}; ROWS=${2:?template rows}; N_SELF=${3:-11000}
OUT=${OUT:?set OUT}; BUDGET=${BUDGET:-540}; W=${WORK:-${TMPDIR:-/tmp}/specpath-gpu}
MAX_NEW=${MAX_NEW:-384}; SEQS=${SEQS:-2048}; BATCH=${BATCH:-64}; SEED=${SEED:-0}; DEVICE=${DEVICE:-cuda}
HELDOUT=${HELDOUT:-0.02}
# each drafter starts from its shipped checkpoint where one is given (empty: from scratch), at its LR
EAGLE3_FROM=${EAGLE3_FROM-builtin_methods/eagle3/specpath_eagle3/heads/eagle3-smollm2}
MTP_FROM=${MTP_FROM-builtin_methods/mtp/specpath_mtp/checkpoints/mtp1-smollm2}
DFLASH_FROM=${DFLASH_FROM-builtin_methods/dflash/specpath_dflash/checkpoints/dflash-smollm2}
DSPARK_FROM=${DSPARK_FROM-builtin_methods/dspark/specpath_dspark/checkpoints/dspark-smollm2}
LR_FROM=${LR_FROM:-6e-4}
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
say() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p "$W" "$OUT"
ROOT=$(pwd)

# 0. the tree on PYTHONPATH, its entry points discoverable, missing wheels beside it
WHL=${WHL:-.gpu/whl}
if ls "$WHL"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/site" "$WHL"/*.whl || exit 1
fi
python3 train/gpu/install_tree.py "$W/site" "$ROOT" || exit 1
P="$W/site:$ROOT/core:$ROOT/engine:$ROOT/train"
for d in "$ROOT"/builtin_methods/*/; do P="$P:${d%/}"; done
export PYTHONPATH="$P" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
SP=(python3 -m specpath)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())"

# 1. the target, converted once (float32, as `specpath` converts a GGUF anywhere)
if [ -d "$TARGET" ]; then
  mkdir -p "$W" && rm -rf "$W/target" && cp -r "$TARGET" "$W/target"
elif [ ! -f "$W/target/config.json" ]; then
  python3 -c "import sys, torch; from specpath_engine.modeling.gguf import convert_gguf; convert_gguf(sys.argv[1], sys.argv[2], dtype=torch.float32)" "$TARGET" "$W/target" || exit 1
fi
say "target converted"

# 2. the prompts: the carried model-free rows + self-instructed requests written here
if [ ! -f "$W/prompts.jsonl" ]; then
  python3 train/gpu/wide_prompts.py "$W/target" "$ROWS" "$N_SELF" "$W/prompts.jsonl" --seed "$SEED" --device "$DEVICE" || exit 1
fi
say "prompts written"

# 3. the responses, a slice of SLICE prompts at a time while the budget allows (the trainings need
#    TRAIN_S seconds): each slice is one `specpath train --data-only` run, merged at the end
split -l "${SLICE:-5000}" -d -a 3 "$W/prompts.jsonl" "$W/slice-"
last=0
for f in "$W"/slice-[0-9][0-9][0-9]; do
  [ -d "$f.run" ] && continue
  if [ $(( $(left) - ${TRAIN_S:-240} - 60 )) -lt $(( last * 5 / 4 )) ]; then say "no time for $f"; break; fi
  t=$(date +%s)
  "${SP[@]}" train eagle3 --target "$W/target" --data "$f" --heldout "$HELDOUT" --device "$DEVICE" \
    --max-new-tokens "$MAX_NEW" --max-num-seqs "$SEQS" --seed "$SEED" --no-progress --out "$f.run" --data-only \
    2>&1 | grep -v "Loading weights"
  last=$(( $(date +%s) - t ))
  say "$f: ${last}s"
done
python3 - "$W/data" "$W"/slice-*.run <<'PY' || exit 1
import sys
from pathlib import Path
from specpath_train.live import merge_live
parts = [Path(p) / "run" / "data" for p in sys.argv[2:] if (Path(p) / "run" / "data" / "features.json").is_file()]
if not parts:
    sys.exit("data: no slice of responses finished (raise BUDGET or lower TRAIN_S)")
meta = merge_live(parts, sys.argv[1])
print(f"data: {meta['parts']} slices, {meta['heldout']} held-out windows, {meta['sequences']} sequences")
PY
say "responses generated"

# 4. four drafters side by side, each for what is left (minus the packing at the end)
MIN=$(python3 -c "print(max(0.5, ($(left) - 75) / 60))")
say "training for $MIN minutes each"
declare -A FROM=([eagle3]="$EAGLE3_FROM" [mtp]="$MTP_FROM" [dflash]="$DFLASH_FROM" [dspark]="$DSPARK_FROM")
for m in ${METHODS:-eagle3 mtp dflash dspark}; do
  # shellcheck disable=SC2086
  python3 train/gpu/train_on.py "$m" --target "$W/target" --data "$W/data" --out "$W/$m" --minutes "$MIN" \
    --device "$DEVICE" --batch "$BATCH" --seed "$SEED" ${FROM[$m]:+--from ${FROM[$m]} --lr $LR_FROM} > "$W/$m.log" 2>&1 &
done
wait
say "trained"

# 5. back: each checkpoint as one tar (config, weights, logs), the responses as token ids
for m in ${METHODS:-eagle3 mtp dflash dspark}; do
  tail -n 4 "$W/$m.log"
  if [ -f "$W/$m/model.safetensors" ]; then
    tar -cf "$OUT/$m.tar" -C "$W/$m" config.json model.safetensors run/work/train.log
  else
    cp "$W/$m.log" "$OUT/$m.log"
  fi
done
python3 - "$W" "$OUT" <<'PY'
import glob, io, json, sys, numpy as np
files = sorted(glob.glob(f"{sys.argv[1]}/slice-*.run/run/data/gen-*.json"))
seqs = [s for f in files for s in json.load(open(f))]
total, kept, part = sum(map(len, seqs)), 0, 0
while seqs and part < 2:  # a file comes back only under 16 MB: as many sequences as fit, two files at most
    n = len(seqs)
    while True:
        buf = io.BytesIO()
        np.savez_compressed(buf, ids=np.concatenate([np.asarray(s, dtype=np.uint16) for s in seqs[:n]]),
                            lengths=np.asarray([len(s) for s in seqs[:n]], dtype=np.int32))
        if buf.tell() < 15_000_000 or n == 1:
            break
        n = n * 3 // 4
    open(f"{sys.argv[2]}/responses-{part}.npz", "wb").write(buf.getvalue())
    kept += sum(map(len, seqs[:n])); seqs = seqs[n:]; part += 1
print(f"responses: {total} tokens generated; {kept} kept in {part} files")
PY
ls -la "$OUT"
say "done"
