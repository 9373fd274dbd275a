"""What ``specpath train METHOD`` runs for each method: the recipe module, the target layers its
features need, and the recipe flags that fit a target of a given size.

The flags are those the shipped SmolLM2 drafters were trained with (``scripts/``), scaled down
for small vocabularies: a reduced training/draft vocabulary of 4,096 ids only where the
target's vocabulary is large (SmolLM2: 49,152), one draft layer, K = 4 blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

LARGE_VOCAB = 8192
"""Above this, recipes score a reduced vocabulary (the full softmax would dominate a step)."""

REDUCED_VOCAB = 4096


def _reduced(config: Mapping[str, Any]) -> int:
    """The reduced vocabulary size for this target (0: the whole vocabulary)."""
    return REDUCED_VOCAB if config["vocab_size"] > LARGE_VOCAB else 0


def _last(config: Mapping[str, Any]) -> tuple[int, ...]:
    return (config["num_hidden_layers"] - 1,)


def _eagle3_layers(config: Mapping[str, Any]) -> tuple[int, ...]:
    from specpath_drafting.config import default_aux_layer_ids, engine_layers

    n = config["num_hidden_layers"]
    return (*engine_layers(default_aux_layer_ids(n)), n - 1)


def _block_layers(kind: str) -> Callable[[Mapping[str, Any]], tuple[int, ...]]:
    def layers(config: Mapping[str, Any]) -> tuple[int, ...]:
        from specpath_drafting.block.config import build_target_layer_ids

        n = config["num_hidden_layers"]
        return (*build_target_layer_ids(n, 3), n - 1)

    return layers


def _eagle3_flags(config: Mapping[str, Any]) -> list[str]:
    vocab = config["vocab_size"]
    draft_vocab = REDUCED_VOCAB if vocab > LARGE_VOCAB else max(2, vocab // 2)
    flags = ["--draft-vocab", str(draft_vocab), "--ttt-steps", "3", "--parallel-depths", "0"]
    return flags + (["--train-vocab", str(_reduced(config))] if _reduced(config) else [])


def _vocab_flags(config: Mapping[str, Any]) -> list[str]:
    return ["--train-vocab", str(_reduced(config))] if _reduced(config) else []


def _draft_model_flags(config: Mapping[str, Any]) -> list[str]:
    n = config["num_hidden_layers"]
    layers = ["0", "1"] if n >= 2 else ["0"]
    return ["--init-layers", *layers, "--train-vocab", str(min(config["vocab_size"], _reduced(config) or 8192))]


BLOCK = ["--k", "4", "--layers", "1", "--anchors", "16"]


@attrs.frozen(kw_only=True)
class MethodRecipe:
    """How one method is trained."""

    method: str
    module: str
    """The recipe module (``main(argv)``), under ``specpath_train.recipes``."""
    layers: Callable[[Mapping[str, Any]], tuple[int, ...]]
    """Target layers (0-based decoder outputs) the features keep; the last one gives the labels."""
    flags: Callable[[Mapping[str, Any]], list[str]]
    """Recipe flags for a target config (on top of the common data/budget flags)."""
    common: bool = True
    """Takes :func:`specpath_train.trainer.add_data_arguments`' flags (the shared-draft recipe has its own)."""
    lr: float = 2e-3


RECIPES: dict[str, MethodRecipe] = {r.method: r for r in (
    MethodRecipe(method="eagle", module="eagle", layers=_last, flags=lambda c: []),
    MethodRecipe(method="eagle3", module="eagle3", layers=_eagle3_layers, flags=_eagle3_flags),
    MethodRecipe(method="mtp", module="mtp", layers=_last,
                 flags=lambda c: ["--modules", "1", "--depth", "3", *_vocab_flags(c)]),
    MethodRecipe(method="dflash", module="dflash", layers=_block_layers("dflash"),
                 flags=lambda c: [*BLOCK, *_vocab_flags(c)]),
    MethodRecipe(method="dspark", module="dspark", layers=_block_layers("dspark"),
                 flags=lambda c: [*BLOCK, "--markov-rank", "16", "--soft-ce", "--loss-weights", "1.0", "0.9", "1.0",
                                  *_vocab_flags(c)]),
    MethodRecipe(method="draft_model", module="draft_model_shared", layers=_last, flags=_draft_model_flags,
                 common=False, lr=1e-3),
)}
"""Every method ``specpath train`` trains (the others have no trainer here)."""

NUM_SPECULATIVE_TOKENS = 4
"""K of the held-out evaluation (and of the block drafters' blocks)."""
