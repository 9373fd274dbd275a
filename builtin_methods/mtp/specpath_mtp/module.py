"""The MTP module and its checkpoints.

One MTP module (DeepSeek-V3 style) turns the hidden state ``h_p`` of position p and the
embedding of the token one step ahead into its own output ``a_p``, from which it predicts the
next token further ahead::

    z   = eh_proj([enorm(Emb(x)) ; hnorm(h)])        # 2d -> d, in the checkpoint's order
    a_p = DecoderLayer(input_layernorm(z), residual=z)
    logits = lm_head(norm(a_p))                      # the target's shared head

Module 0 reads the target's last decoder-layer output (before the final norm) and the token at
p+1, and predicts p+2; module k reads module k-1's output and the token at p+k+1, and predicts
p+k+2. The embedding and the LM head are the target's (lent through ``SpeculatorContext``);
``norm`` is the module's own copy of the final norm (DeepSeek's ``shared_head.norm``),
initialised from the target's and trained with the module.

Checkpoint layout (HF format, what :func:`save_mtp_checkpoint` writes and
:func:`load_mtp_modules` reads): ``config.json`` holds the target's architecture fields plus
``num_nextn_predict_layers`` (= ``n_predict``, the number of modules) and ``mtp_input_order``
(``["embedding", "hidden"]``, the engines' order, or ``["hidden", "embedding"]``, the paper's);
``model.safetensors`` holds ``mtp.{i}.*`` tensors only. Other tensors in the file (a target
checkpoint that carries its MTP modules) are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from specpath_drafting.checkpoints import read_drafter_config
from specpath_drafting.heads import HiddenStateHead
from specpath_engine.modeling.layers import DraftLayer
from specpath_engine.modeling.native import DraftHead, native_linears
from specpath_drafting.heads import HeadConfig
from specpath_engine.modeling.norm import RMSNorm
from specpath_mtp.config import declared_modules as num_modules

MODEL_TYPE = "mtp"
"""``model_type`` of the checkpoints this plugin writes (one of the MTP model types)."""
ARCHITECTURE = "LlamaMTPModules"
INPUT_ORDERS = (("embedding", "hidden"), ("hidden", "embedding"))
DEFAULT_INPUT_ORDER = ("embedding", "hidden")
PREFIX = "mtp."


def input_order(config: Mapping[str, Any]) -> tuple[str, str]:
    order = tuple(config.get("mtp_input_order") or DEFAULT_INPUT_ORDER)
    if order not in INPUT_ORDERS:
        raise ValueError(f"mtp_input_order must be one of {[list(o) for o in INPUT_ORDERS]}, got {list(order)}")
    return order  # type: ignore[return-value]


class MTPModule(HiddenStateHead):
    """One MTP module, driven by the hidden-state drafting loop like an EAGLE head (see the
    module docstring). ``features`` are the hidden states it reads: the target's for module 0,
    the previous module's output otherwise."""

    def __init__(self, config: HeadConfig, *, order: Sequence[str] = DEFAULT_INPUT_ORDER,
                 embed_tokens: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 lm_head: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        super().__init__(config, embed_tokens)
        d = config.hidden_size
        self.order = tuple(order)
        self.enorm = RMSNorm(d, config.rms_norm_eps)
        self.hnorm = RMSNorm(d, config.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * d, d, bias=False)
        self.input_layernorm = RMSNorm(d, config.rms_norm_eps)
        self.layer = DraftLayer(config, attn_in=d)
        self.norm = RMSNorm(d, config.rms_norm_eps)
        self._lm_head = lm_head

    @property
    def dtype(self) -> torch.dtype:
        return self.norm.weight.dtype  # norms keep plain parameters (linears may be pre-packed)

    def layer_input(self, embeds: torch.Tensor, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        parts = {"embedding": self.enorm(embeds), "hidden": self.hnorm(features)}
        z = self.eh_proj(torch.cat([parts[name] for name in self.order], dim=-1))
        return self.input_layernorm(z), z

    def logits(self, a: torch.Tensor) -> torch.Tensor:
        if self._lm_head is None:
            raise ValueError("MTPModule needs the target's LM head (SpeculatorContext.lm_head)")
        return self._lm_head(self.norm(a)).float()

    def native_draft_head(self):
        """The chain's native form: the MTP input stage and the LM head's kept rows (a head trained
        on a reduced vocabulary, :class:`~specpath_drafting.vocab.RestrictedLMHead`); None for a
        full-vocabulary head (its logits stay on the per-op path)."""
        native_rows = getattr(self._lm_head, "native_rows", None)
        table, layer, fuse = self.embedding_table(), self.layer.native_linears(), native_linears(self.eh_proj)
        norms = (self.enorm, self.hnorm, self.input_layernorm, self.norm, self.layer.post_attention_layernorm)
        if native_rows is None or table is None or layer is None or fuse is None or table.dtype is not torch.bfloat16 \
                or any(n.weight.dtype is not torch.bfloat16 for n in norms):
            return None
        rows = native_rows(torch.zeros(1, self.config.hidden_size, dtype=torch.bfloat16))
        if rows is None:
            return None
        lm_head, bias, ids = rows
        embed_norm, hidden_norm, fuse_norm, final_norm, post_norm = ((n.weight, n.eps) for n in norms)
        return DraftHead.of(embed=table, embed_norm=embed_norm, hidden_norm=hidden_norm, final_norm=final_norm,
                            post_norm=post_norm, layer=layer, lm_head=lm_head, lm_bias=bias, ids=ids, fuse=fuse[0],
                            fuse_norm=fuse_norm, hidden_first=self.order[0] == "hidden",
                            ingests=self.config.num_taps == 1
                            and self.config.target_hidden_size in (None, self.config.hidden_size))


def head_config(config: Mapping[str, Any]) -> HeadConfig:
    """The module architecture from a checkpoint's (target-shaped) ``config.json``."""
    return HeadConfig.for_target("mtp", config)


def build_modules(config: Mapping[str, Any], *, embed_tokens=None, lm_head=None) -> list[MTPModule]:
    n = num_modules(config)
    if n < 1:
        raise ValueError("the checkpoint declares no MTP modules (num_nextn_predict_layers / n_predict)")
    hc, order = head_config(config), input_order(config)
    return [MTPModule(hc, order=order, embed_tokens=embed_tokens, lm_head=lm_head) for _ in range(n)]


def checkpoint_config(target_config: Mapping[str, Any], n: int, *, order: Sequence[str] = DEFAULT_INPUT_ORDER,
                      extra: Mapping[str, Any] | None = None, dtype: str = "float32") -> dict[str, Any]:
    """``config.json`` of an MTP checkpoint for a target: its architecture fields, the module
    count and the input order."""
    keep = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "rope_scaling",
            "max_position_embeddings", "hidden_act", "bos_token_id", "eos_token_id", "pad_token_id")
    out = {k: target_config[k] for k in keep if k in target_config}
    out.update({
        "architectures": [ARCHITECTURE],
        "model_type": MODEL_TYPE,
        "num_nextn_predict_layers": n,
        "n_predict": n,
        "mtp_input_order": list(order),
        "torch_dtype": dtype,
    })
    out.update(extra or {})
    return out


def save_mtp_checkpoint(modules: Sequence[MTPModule], path: str | Path, target_config: Mapping[str, Any], *,
                        extra: Mapping[str, Any] | None = None, dtype: torch.dtype = torch.float32) -> Path:
    """Write ``config.json`` + ``model.safetensors`` (``mtp.{i}.*`` tensors only, in ``dtype``;
    the speculator casts them to the target's dtype when it loads them)."""
    from specpath_engine.modeling.checkpoint import save_checkpoint

    state = {}
    for i, module in enumerate(modules):
        for name, tensor in module.state_dict().items():
            if not name.startswith("rotary."):
                state[f"{PREFIX}{i}.{name}"] = tensor.to(dtype)
    config = checkpoint_config(target_config, len(modules), order=modules[0].order, extra=extra,
                               dtype=str(dtype).removeprefix("torch."))
    return save_checkpoint(path, config=config, state_dict=state)


def read_config(path: str | Path) -> dict[str, Any]:
    """An MTP checkpoint's ``config.json`` (read as every drafter checkpoint's is)."""
    return read_drafter_config(path, dict, "MTP checkpoint")


def load_mtp_modules(path: str | Path, *, embed_tokens=None, lm_head=None) -> list[MTPModule]:
    """The modules of an MTP checkpoint with their weights; every module tensor must be present
    with its shape (one-line error naming the file otherwise)."""
    from safetensors import safe_open

    from specpath_engine.modeling.checkpoint import CheckpointError

    config = read_config(path)
    try:
        modules = build_modules(config, embed_tokens=embed_tokens, lm_head=lm_head)
    except ValueError as exc:  # hidden_act, rms_norm_eps, module count: name the file
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{Path(path) / 'config.json'}: {' '.join(str(exc).split())}") from None
    weights = Path(path) / "model.safetensors"
    if not weights.exists():
        raise ValueError(f"{weights}: missing (the MTP checkpoint has no weights)")
    from specpath_engine.modeling.checkpoint import check_safetensors_header

    check_safetensors_header(weights)  # framing and float dtypes, one line naming the file
    with safe_open(str(weights), framework="pt") as f:
        names = list(f.keys())
        owned = tuple(f"{PREFIX}{i}." for i in range(len(modules)))
        stray = sorted(k for k in names if not k.startswith(owned))
        if stray:  # a tensor no module loads: a mislabelled or mismatched checkpoint, never ignored
            raise CheckpointError(f"{weights}: {len(stray)} tensor(s) belong to no MTP module of the config "
                                  f"({len(modules)} modules), e.g. {', '.join(stray[:3])}")
        for i, module in enumerate(modules):
            expected = {k: v.shape for k, v in module.state_dict().items() if not k.startswith("rotary.")}
            prefix = f"{PREFIX}{i}."
            found = {k[len(prefix):] for k in names if k.startswith(prefix)}
            missing, extra = sorted(set(expected) - found), sorted(found - set(expected))
            if missing or extra:
                raise CheckpointError(f"{weights}: module {i} does not match the config (missing "
                                      f"{[prefix + k for k in missing[:3]]}, unexpected {[prefix + k for k in extra[:3]]})")
            state = {}
            for name, shape in expected.items():
                tensor = f.get_tensor(prefix + name)
                if tuple(tensor.shape) != tuple(shape):
                    raise ValueError(f"{weights}: {prefix + name} has shape {tuple(tensor.shape)}, expected {tuple(shape)}")
                if not bool(torch.isfinite(tensor).all()):
                    raise CheckpointError(f"{weights}: tensor {prefix + name!r} has NaN or infinite values")
                state[name] = tensor
            module.load_state_dict(state, strict=False)
    return modules


def random_mtp_checkpoint(target_path: str | Path, path: str | Path, n: int, *, seed: int = 0,
                          order: Sequence[str] = DEFAULT_INPUT_ORDER) -> Path:
    """A random-weight MTP checkpoint shaped for the target at ``target_path`` (for tests),
    its final norms copied from the target's."""
    from specpath_engine.modeling.checkpoint import load_state_dict

    target_config = read_config(target_path)
    config = checkpoint_config(target_config, n, order=order)
    norm = load_state_dict(target_path).get("model.norm.weight")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        modules = build_modules(config)
        with torch.no_grad():
            for module in modules:
                for name, p in module.named_parameters():
                    if p.dim() == 2:
                        p.normal_(0.0, 0.5 / p.shape[1] ** 0.5)
                if norm is not None:
                    module.norm.weight.copy_(norm)
    for module in modules:
        module.order = tuple(order)
    return save_mtp_checkpoint(modules, path, target_config)
