"""A draft vocabulary of byte strings, for a target whose tokens are single bytes.

``specpath_engine.sample.tli`` maps two vocabularies through their *intersection*: tokens that stand
for the same bytes. Against a byte-level target that intersection is only the draft's 256
single-byte tokens, so a BPE draft restricted to it would draft one byte per pass and lose the
reason to have a BPE draft at all. Every draft token is, however, exactly a *sequence* of target
tokens (its bytes), so we lift each greedy draft token to its bytes: K target drafts cost about
K / (bytes per token) draft passes. The drafts are one-hot (greedy), so the target verifies them
with ordinary rejection sampling in its own vocabulary and the output distribution is unchanged.

Entry bytes come from ``specpath_engine.sample.tli.token_bytes`` (the byte-level BPE alphabet); the
tokenizer reads text already mapped to that alphabet (:func:`to_alphabet`), so any byte string,
valid UTF-8 or not, has a tokenization.

Token healing: the last token of the context's tokenization may be the start of a longer token
(``re`` before ``return``). The draft re-predicts it, constrained to tokens that begin with its
bytes, and only the bytes past it become drafts.
"""

from __future__ import annotations

from pathlib import Path

import torch

from specpath_engine.sample.tli import detect_space_marker, token_bytes

TOKENIZER_FILE = "tokenizer.json"


def byte_alphabet() -> list[str]:
    """byte -> its character in the byte-level BPE alphabet (GPT-2's): printable Latin-1 bytes
    stand for themselves, the others are shifted to code points 256 and up."""
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    table, shift = [], 0
    for b in range(256):
        if b in printable:
            table.append(chr(b))
        else:
            table.append(chr(256 + shift))
            shift += 1
    return table


_TABLE = byte_alphabet()

PRETOKENIZE_PATTERN = r"Ġ?[A-Za-z_]+|Ġ?[0-9]+|Ġ+(?=Ġ)|Ġ|Ċ+|[^A-Za-z0-9_ĠĊ]+"
"""Pre-token split over alphabet-mapped text (Ġ = space, Ċ = newline): words with their leading
space, numbers, runs of indentation, newlines, and punctuation runs."""


def to_alphabet(data: bytes | list[int]) -> str:
    """Bytes as a string of byte-level alphabet characters (what the draft tokenizer reads)."""
    return "".join(_TABLE[b] for b in data)


class ByteStringVocab:
    """The draft tokenizer plus each draft token's bytes."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        size = tokenizer.get_vocab_size()
        tokens = [tokenizer.id_to_token(i) for i in range(size)]
        marker = detect_space_marker([t for t in tokens if t is not None])
        self.bytes = [b"" if t is None else token_bytes(t, marker) for t in tokens]
        self.size = size
        self._prefix_masks: dict[bytes, torch.Tensor] = {}

    @classmethod
    def from_checkpoint(cls, path: str | Path) -> ByteStringVocab:
        from tokenizers import Tokenizer

        file = Path(path) / TOKENIZER_FILE
        if not file.is_file():
            raise ValueError(f"{path}: a heterogeneous-vocabulary draft needs {TOKENIZER_FILE}")
        return cls(Tokenizer.from_file(str(file)))

    def encode(self, data: bytes | list[int]) -> list[int]:
        return self.tokenizer.encode(to_alphabet(data)).ids

    def encode_batch(self, texts: list[list[int]]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch([to_alphabet(t) for t in texts])]

    def prefix_mask(self, prefix: bytes, device: torch.device | str = "cpu") -> torch.Tensor:
        """bool ``[vocab]``: tokens whose bytes begin with ``prefix`` (cached)."""
        mask = self._prefix_masks.get(prefix)
        if mask is None:
            mask = torch.tensor([b.startswith(prefix) and len(b) > 0 for b in self.bytes], device=device)
            self._prefix_masks[prefix] = mask
        return mask


def build_bpe_tokenizer(texts: list[bytes], vocab_size: int):
    """A BPE vocabulary over the byte-level alphabet (every byte string has a tokenization)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated")
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=byte_alphabet(), limit_alphabet=256,
                                  show_progress=False)
    tokenizer.train_from_iterator([to_alphabet(t) for t in texts], trainer)
    return tokenizer
