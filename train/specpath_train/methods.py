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

NUM_SPECULATIVE_TOKENS = 4
"""K of the held-out evaluation (and of the block drafters' blocks and the parallel variants' slots)."""


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
    init_flag: str | None = None
    """The recipe's flag that starts it from a trained checkpoint (``--from``); None: it cannot."""
    init_fits: Callable[[Mapping[str, Any], Mapping[str, Any]], str | None] = lambda c, t: None
    """``(checkpoint config, target config)`` -> why a ``--from`` checkpoint cannot start a run for
    this target (None: it can)."""
    init_flags: Callable[[Mapping[str, Any]], list[str]] = lambda c: []
    """Recipe flags a ``--from`` checkpoint's config sets (its shape wins over the method's flags)."""
    draft_vocab: bool = False
    """The drafter has a reduced vocabulary of its own (``--draft-vocab`` sizes it; with ``--from``
    the recipe's ``--revocab`` chooses it again from this run's data instead of keeping the head's)."""
    layers_flag: str | None = None
    """The recipe's flag for the drafter's layer count (``--draft-layers``); None: a fixed depth."""
    init_layers: Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[int, ...]] | None = None
    """``(checkpoint config, target config)`` -> the target layers a ``--from`` run's features keep
    (None: :attr:`layers`, the same for every start)."""

    def run_layers(self, target: Mapping[str, Any], init: Mapping[str, Any] | None) -> tuple[int, ...]:
        """The target layers this run's features keep: a ``--from`` checkpoint's where it says."""
        if init is not None and self.init_layers is not None:
            return self.init_layers(init, target)
        return self.layers(target)


def _shape_mismatch(pairs: Mapping[str, tuple[Any, Any]]) -> str | None:
    """``{what: (the checkpoint's, the target's)}`` -> the first pair that differs, as a phrase."""
    for what, (mine, theirs) in pairs.items():
        if mine != theirs:
            return f"{what} {mine} where the target needs {theirs}"
    return None


def _eagle3_init_fits(ckpt: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
    """The recipe's head: one layer at the target's width, reading the default taps."""
    from specpath_drafting.config import default_aux_layer_ids

    taps = list(default_aux_layer_ids(target["num_hidden_layers"]))
    return _shape_mismatch({
        "hidden size": (ckpt.get("hidden_size"), target["hidden_size"]),
        "target hidden size": (ckpt.get("target_hidden_size", target["hidden_size"]), target["hidden_size"]),
        "vocabulary": (ckpt.get("vocab_size"), target["vocab_size"]),
        "target layer count": (ckpt.get("target_num_hidden_layers", target["num_hidden_layers"]),
                               target["num_hidden_layers"]),
        "layer count": (ckpt.get("num_hidden_layers", 1), 1),
        "taps": (list(ckpt.get("eagle_aux_hidden_state_layer_ids") or taps), taps)})


def _eagle3_init_flags(ckpt: Mapping[str, Any]) -> list[str]:
    """The draft vocabulary is the starting head's (its rows and d2t/t2d maps are loaded)."""
    return ["--draft-vocab", str(ckpt.get("draft_vocab_size") or ckpt["vocab_size"])]


def _layer_shape(ckpt: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The pairs a drafter with decoder layers of the target's shape and its vocabulary must match."""
    return {key.replace("_", " "): (ckpt.get(key), target.get(key)) for key in
            ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size")}


def _mtp_init_fits(ckpt: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
    """The recipe's drafter: one module (``--modules 1``) with a decoder layer of the target's shape."""
    modules = ckpt.get("num_nextn_predict_layers", ckpt.get("n_predict"))
    return _shape_mismatch({"module count": (modules, 1), **_layer_shape(ckpt, target)})


def _draft_model_init_fits(ckpt: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
    if ckpt.get("shares_target_embeddings") is not True:
        return "it is not a draft that borrows the target's embedding (the draft specpath train makes)"
    layers = 2 if target["num_hidden_layers"] >= 2 else 1  # _draft_model_flags' --init-layers
    if ckpt.get("num_hidden_layers") != layers:
        return f"it has {ckpt.get('num_hidden_layers')} layers, the draft specpath train makes for this target {layers}"
    return _shape_mismatch(_layer_shape(ckpt, target))


def _block_init_fits(kind: str) -> Callable[[Mapping[str, Any], Mapping[str, Any]], str | None]:
    def fits(ckpt: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
        """A block drafter of this kind with layers of the target's shape, reading its layers."""
        n = target["num_hidden_layers"]
        taps = ckpt.get("target_layer_ids") or []
        if ckpt.get("model_type") != kind:
            return f"model_type {ckpt.get('model_type')!r} where the recipe trains {kind!r}"
        if not taps or not all(isinstance(i, int) and 0 <= i < n for i in taps):
            return f"target layers {list(taps)} where the target has {n}"
        return _shape_mismatch({"target layer count": (ckpt.get("target_num_hidden_layers"), n),
                                "target hidden size": (ckpt.get("target_hidden_size"), target["hidden_size"]),
                                **_layer_shape(ckpt, target)})

    return fits


def _block_init_flags(ckpt: Mapping[str, Any]) -> list[str]:
    """The starting drafter's layout: its taps, layers and K (and DSpark's Markov rank and layout)."""
    flags = ["--tap-ids", *map(str, ckpt["target_layer_ids"]), "--taps", str(len(ckpt["target_layer_ids"])),
             "--layers", str(ckpt["num_hidden_layers"]), "--k", str(ckpt.get("num_draft_tokens", NUM_SPECULATIVE_TOKENS))]
    if ckpt.get("model_type") == "dspark":
        flags += ["--markov-rank", str(ckpt.get("markov_rank", 0))]
        if not ckpt.get("anchor_sampling", True):
            flags.append("--fill-in")
    return flags


def _block_init_layers(ckpt: Mapping[str, Any], target: Mapping[str, Any]) -> tuple[int, ...]:
    return (*ckpt["target_layer_ids"], target["num_hidden_layers"] - 1)


@attrs.frozen(kw_only=True)
class Variant:
    """A variant of a method's drafter (``specpath train METHOD --variant NAME``): the method's
    recipe with flags that change what the drafter learns. The checkpoint declares the variant
    (``parallel_drafting: true``), so ``{"model": DIR}`` serves it as trained."""

    name: str
    method: str
    flags: Callable[[Mapping[str, Any]], list[str]]
    """Recipe flags on top of (and overriding) the method's."""
    summary: str
    lr_from: float
    """Peak learning rate of a fine-tune (``--from``; from scratch the method's)."""


VARIANTS: dict[tuple[str, str], Variant] = {(v.method, v.name): v for v in (
    # PARD: the draft also learns drafts 2..K from K-1 mask tokens (pard_token_id: a special token
    # the training text never holds, chosen by the recipe); the real copy keeps the autoregressive
    # objective, so the checkpoint serves both shapes
    Variant(name="pard", method="draft_model", summary="PARD: all K drafts in one pass from K-1 mask tokens",
            flags=lambda c: ["--pard-depth", str(NUM_SPECULATIVE_TOKENS - 1), "--pard-token", "auto"], lr_from=5e-4),
    # P-EAGLE: a learned mask embedding and feature stand in for drafts 2..K, which ride in the
    # first draft's pass (depth 0 keeps its loss; the chain's later depths are not trained)
    Variant(name="p-eagle", method="eagle3", summary="P-EAGLE: drafts 2..K from mask slots in the first draft's pass",
            flags=lambda c: ["--ttt-steps", "1", "--parallel-depths", str(NUM_SPECULATIVE_TOKENS),
                             "--parallel-weight", "1.0"], lr_from=1e-3),
)}
"""Every ``--variant`` of ``specpath train`` (method, name)."""


def with_flags(base: list[str], extra: list[str]) -> list[str]:
    """``base`` recipe flags with ``extra``'s flags replacing theirs (a flag and its values)."""

    def split(argv: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        key = None
        for a in argv:
            if a.startswith("--"):
                key = a
                out[key] = []
            elif key is not None:
                out[key].append(a)
        return out

    merged = {**split(base), **split(extra)}
    return [x for flag, values in merged.items() for x in (flag, *values)]


RECIPES: dict[str, MethodRecipe] = {r.method: r for r in (
    MethodRecipe(method="eagle", module="eagle", layers=_last, flags=lambda c: []),
    MethodRecipe(method="eagle3", module="eagle3", layers=_eagle3_layers, flags=_eagle3_flags, init_flag="--init",
                 init_fits=_eagle3_init_fits, init_flags=_eagle3_init_flags, draft_vocab=True),
    MethodRecipe(method="mtp", module="mtp", layers=_last,
                 flags=lambda c: ["--modules", "1", "--depth", "3", *_vocab_flags(c)], init_flag="--init",
                 init_fits=_mtp_init_fits),
    MethodRecipe(method="dflash", module="dflash", layers=_block_layers("dflash"),
                 flags=lambda c: [*BLOCK, *_vocab_flags(c)], init_flag="--init", init_fits=_block_init_fits("dflash"),
                 init_flags=_block_init_flags, init_layers=_block_init_layers, layers_flag="--layers"),
    MethodRecipe(method="dspark", module="dspark", layers=_block_layers("dspark"),
                 flags=lambda c: [*BLOCK, "--markov-rank", "16", "--soft-ce", "--loss-weights", "1.0", "0.9", "1.0",
                                  *_vocab_flags(c)], init_flag="--init", init_fits=_block_init_fits("dspark"),
                 init_flags=_block_init_flags, init_layers=_block_init_layers, layers_flag="--layers"),
    MethodRecipe(method="draft_model", module="draft_model_shared", layers=_last, flags=_draft_model_flags,
                 common=False, lr=1e-3, init_flag="--init", init_fits=_draft_model_init_fits),
)}
"""Every method ``specpath train`` trains (the others have no trainer here)."""
