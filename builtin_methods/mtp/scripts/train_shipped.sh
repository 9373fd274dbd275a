#!/usr/bin/env bash
# Train the shipped MTP checkpoints (one module, then three) for a target, one run after the other.
#
#   builtin_methods/mtp/scripts/train_shipped.sh TARGET RUN_DIR MINUTES1 MINUTES3 [INIT_DIR] [--export]
#
# TARGET: target checkpoint; RUN_DIR: runs/... (features shared by both runs, logs, checkpoints);
# MINUTES1/MINUTES3: training budgets; INIT_DIR: a previous RUN_DIR whose mtp1/mtp3 checkpoints
# the modules start from (or "-"); --export: also write specpath_mtp/checkpoints/mtp{1,3}.
set -euo pipefail
target=$1 run=$2 m1=$3 m3=$4 init=${5:--} export=${6:-}
pkg=$(dirname "$0")/../specpath_mtp
mkdir -p "$run"
for n in 1 3; do
  minutes=$m1; [ "$n" = 3 ] && minutes=$m3
  batch=12; [ "$n" = 3 ] && batch=8
  extra=()
  [ "$init" != "-" ] && extra+=(--init "$init/mtp$n/checkpoint")
  [ "$export" = "--export" ] && extra+=(--export "$pkg/checkpoints/mtp$n")
  nice -n 5 python3 -m specpath_train.recipes.mtp --modules "$n" --target "$target" --features "$run/features" \
    --out "$run/mtp$n" --minutes "$minutes" --threads 1 --batch "$batch" "${extra[@]}"
done
