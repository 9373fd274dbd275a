#!/usr/bin/env bash
# train/gpu/train_drafters.sh end to end in ~2 minutes on a random target of SmolLM2's width and
# vocabulary (LAYERS deep, default 4; its tokenizer files from TOKENIZER_DIR): the check a GPU session
# runs before it spends its device time on the real job. LAYERS=30 SEQS=2048 BATCH=64 gives the real
# job's shapes (memory, tokens/s) on a target that answers nonsense.
#
#   OUT=/some/dir train/gpu/smoke.sh TOKENIZER_DIR TEMPLATE_ROWS.jsonl.gz
set -uo pipefail
TOK=${1:?a directory holding tokenizer.json and tokenizer_config.json}; ROWS=${2:?template rows}
W=${WORK:-${TMPDIR:-/tmp}/specpath-smoke}; mkdir -p "$W"
python3 - "$TOK" "$W/random-target" "${LAYERS:-4}" <<'PY'
import shutil, sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM
tok, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=int(sys.argv[3]),
                     num_attention_heads=9, num_key_value_heads=3, head_dim=64, rms_norm_eps=1e-5,
                     rope_theta=100000.0, max_position_embeddings=8192, tie_word_embeddings=True,
                     bos_token_id=1, eos_token_id=2, pad_token_id=2)
LlamaForCausalLM(config).save_pretrained(out)
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(f"{tok}/{name}", out)
print("random target", out)
PY
WORK="$W/run" BUDGET=${BUDGET:-150} TRAIN_S=${TRAIN_S:-40} MAX_NEW=${MAX_NEW:-24} SEQS=${SEQS:-64} BATCH=${BATCH:-4} HELDOUT=0.2 EAGLE3_FROM= MTP_FROM= DFLASH_FROM= DSPARK_FROM= \
  "$(dirname "$0")/train_drafters.sh" "$W/random-target" "$ROWS" "${N_SELF:-8}"
