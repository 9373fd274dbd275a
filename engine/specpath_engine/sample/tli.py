"""Token-level intersection (TLI, Timor et al. 2025): verify a drafter whose vocabulary differs
from the target's, losslessly.

Tokens are matched by the bytes they stand for, so the byte-level BPE space marker ``Ġ`` (and
the rest of its byte alphabet), the SentencePiece marker ``▁`` and its ``<0xNN>`` byte tokens
all compare equal to the same text. The drafter samples only inside the intersection
(:meth:`VocabMapping.mask_draft_logits`); its drafts and probabilities are then lifted into the
target vocabulary (zero elsewhere) and verified there by ordinary rejection sampling, whose
residual ``max(0, p - q)`` covers the target-only tokens. Tokens fed back to the drafter go
through :meth:`VocabMapping.target_ids_to_draft`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs
import torch

Vocab = Mapping[str, int] | Sequence[str]
"""A vocabulary: ``token -> id`` (``tokenizer.get_vocab()``) or a list indexed by id."""

_SP_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _byte_level_alphabet() -> dict[str, int]:
    """The byte-level BPE alphabet (as in GPT-2): printable bytes stand for themselves, the
    rest are shifted to code points 256 and up. Returns char -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, shift = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + shift)] = b
            shift += 1
    return chars


_BYTE_LEVEL = _byte_level_alphabet()


def detect_space_marker(tokens: Sequence[str]) -> str | None:
    """``"Ġ"`` for a byte-level BPE vocabulary, ``"▁"`` for SentencePiece, None otherwise."""
    byte_level = sum(t.startswith("Ġ") for t in tokens)
    sentencepiece = sum(t.startswith("▁") for t in tokens)
    if byte_level == sentencepiece == 0:
        return None
    return "Ġ" if byte_level > sentencepiece else "▁"


def token_bytes(token: str, space_marker: str | None) -> bytes:
    """The bytes a vocabulary entry stands for, under its vocabulary's space convention."""
    if space_marker == "Ġ" and all(c in _BYTE_LEVEL for c in token):
        return bytes(_BYTE_LEVEL[c] for c in token)
    if space_marker == "▁":
        byte = _SP_BYTE.fullmatch(token)
        if byte:
            return bytes([int(byte.group(1), 16)])
        token = token.replace("▁", " ")
    return token.encode("utf-8")


def _as_id_list(vocab: Vocab) -> list[tuple[int, str]]:
    pairs = [(i, t) for t, i in vocab.items()] if isinstance(vocab, Mapping) else list(enumerate(vocab))
    return sorted(pairs)


@attrs.frozen(kw_only=True)
class VocabMapping:
    """Maps between a drafter's and a target's vocabularies over their shared tokens."""

    draft_to_target: torch.Tensor
    """int64 ``[draft_vocab]``: the target id of each draft token, -1 outside the intersection."""
    target_to_draft: torch.Tensor
    """int64 ``[target_vocab]``: the draft id of each target token, -1 outside the intersection."""
    _on_device: dict = attrs.field(factory=dict, init=False, repr=False, eq=False)

    @classmethod
    def from_vocabs(
        cls, draft_vocab: Vocab, target_vocab: Vocab, *,
        draft_space_marker: str | None = "auto", target_space_marker: str | None = "auto",
    ) -> VocabMapping:
        """Build the intersection; ``"auto"`` detects each vocabulary's space marker. When several
        ids of one vocabulary stand for the same bytes, the smallest id is kept."""
        draft, target = _as_id_list(draft_vocab), _as_id_list(target_vocab)
        if draft_space_marker == "auto":
            draft_space_marker = detect_space_marker([t for _, t in draft])
        if target_space_marker == "auto":
            target_space_marker = detect_space_marker([t for _, t in target])
        target_ids: dict[bytes, int] = {}
        for i, token in target:
            target_ids.setdefault(token_bytes(token, target_space_marker), i)
        d2t = torch.full((max((i for i, _ in draft), default=-1) + 1,), -1, dtype=torch.long)
        t2d = torch.full((max((i for i, _ in target), default=-1) + 1,), -1, dtype=torch.long)
        seen: set[bytes] = set()
        for i, token in draft:
            key = token_bytes(token, draft_space_marker)
            if key in seen or key not in target_ids:
                continue
            seen.add(key)
            d2t[i] = target_ids[key]
            t2d[target_ids[key]] = i
        if not seen:
            raise ValueError("the draft and target vocabularies share no token")
        return cls(draft_to_target=d2t, target_to_draft=t2d)

    @classmethod
    def from_tokenizers(cls, draft_tokenizer, target_tokenizer) -> VocabMapping:
        """Build from two Hugging Face tokenizers, detecting each space marker by tokenizing " a"."""
        return cls.from_vocabs(
            draft_tokenizer.get_vocab(), target_tokenizer.get_vocab(),
            draft_space_marker=_tokenizer_space_marker(draft_tokenizer),
            target_space_marker=_tokenizer_space_marker(target_tokenizer),
        )

    @property
    def draft_vocab_size(self) -> int:
        return self.draft_to_target.numel()

    @property
    def target_vocab_size(self) -> int:
        return self.target_to_draft.numel()

    @property
    def num_shared(self) -> int:
        return int((self.draft_to_target >= 0).sum())

    def _maps(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        key = str(device)
        if key not in self._on_device:
            self._on_device[key] = (self.draft_to_target.to(device), self.target_to_draft.to(device))
        return self._on_device[key]

    def mask_draft_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """Draft logits with every token outside the intersection set to -inf (sample from these)."""
        d2t, _ = self._maps(logits.device)
        return logits.masked_fill(d2t < 0, float("-inf"))

    def draft_ids_to_target(self, ids: torch.Tensor) -> torch.Tensor:
        """Target ids of draft tokens; a token outside the intersection is an error."""
        d2t, _ = self._maps(ids.device)
        ids = ids.long()
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= d2t.numel()):
            raise ValueError(f"draft token ids must lie in [0, {d2t.numel()})")
        mapped = d2t[ids]
        if bool((mapped < 0).any()):
            bad = int(ids[mapped < 0][0])
            raise ValueError(f"draft token {bad} is outside the shared vocabulary; sample drafts from mask_draft_logits(...)")
        return mapped

    def target_ids_to_draft(self, ids: torch.Tensor, unk_id: int) -> torch.Tensor:
        """Draft ids of target tokens (to feed the drafter); tokens it lacks become ``unk_id``."""
        _, t2d = self._maps(ids.device)
        mapped = t2d[ids.long()]
        return torch.where(mapped >= 0, mapped, torch.full_like(mapped, unk_id))

    def to_target(self, draft_ids: torch.Tensor, draft_probs: torch.Tensor | None, *, kernels=None):
        """(draft ids, draft probabilities) in the target's vocabulary, ready for verification.
        Probabilities are renormalised over the intersection, so unmasked ones are accepted too."""
        ids = self.draft_ids_to_target(draft_ids)
        if draft_probs is None:
            return ids, None
        if draft_probs.dim() != 2 or draft_probs.shape[1] != self.draft_vocab_size:
            raise ValueError(f"draft_probs must be [num_drafts, {self.draft_vocab_size}] (the drafter's vocabulary) with vocab_mapping")
        if kernels is None:
            from specpath_engine.modeling.dispatch import triton_or_reference

            kernels = triton_or_reference(draft_probs.device, "specpath_engine.sample.triton_kernels",
                                          "specpath_engine.sample.reference")
        _, t2d = self._maps(draft_probs.device)
        return ids, kernels.lift_probs(draft_probs.float(), t2d)


def _tokenizer_space_marker(tokenizer) -> str | None:
    pieces = "".join(tokenizer.convert_ids_to_tokens(tokenizer.encode(" a", add_special_tokens=False)))
    for marker in ("Ġ", "▁"):
        if marker in pieces:
            return marker
    return None
