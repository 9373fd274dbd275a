"""Tokenizers for the engine and the CLI: the byte-level one of the embedded model, or an HF one.

The embedded default model reads raw UTF-8 bytes (ids 0..255). NUL (id 0) never occurs in source
code, so it is both the end-of-document token (EOS: generation stops at the end of a file) and the
start-of-document marker (BOS); prompts are encoded without it by default because training windows
mostly start mid-file. A checkpoint names its tokenizer in ``tokenizer_config.json``:
``{"tokenizer_class": "ByteTokenizer"}`` for this one; anything else is handed to ``transformers``
(``AutoTokenizer``), if it is installed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Protocol, Sequence

from specpath.modeling.checkpoint import TOKENIZER_CONFIG_NAME, read_json

BYTE_TOKENIZER_CLASS = "ByteTokenizer"


class Tokenizer(Protocol):
    vocab_size: int
    bos_token_id: int | None
    eos_token_id: int | None

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...


class ByteTokenizer:
    """UTF-8 bytes as token ids; decoding replaces invalid sequences and skips ids >= 256."""

    vocab_size = 256

    def __init__(self, *, bos_token_id: int | None = 0, eos_token_id: int | None = 0) -> None:
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [self.bos_token_id, *ids] if add_bos and self.bos_token_id is not None else ids

    def decode(self, ids: Iterable[int]) -> str:
        data = bytes(i for i in (int(t) for t in ids) if 0 <= i < 256 and i != self.eos_token_id)
        return data.decode("utf-8", errors="replace")

    def config_dict(self) -> dict[str, Any]:
        """The ``tokenizer_config.json`` that makes ``load_tokenizer`` rebuild this tokenizer."""
        return {
            "tokenizer_class": BYTE_TOKENIZER_CLASS,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "encoding": "utf-8",
            "add_bos_token": False,
        }


class HFTokenizer:
    """Adapter giving a ``transformers`` tokenizer the small interface above."""

    def __init__(self, hf_tokenizer: Any) -> None:
        self._tok = hf_tokenizer
        self.vocab_size = len(hf_tokenizer)
        self.bos_token_id = hf_tokenizer.bos_token_id
        self.eos_token_id = hf_tokenizer.eos_token_id

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]:
        ids = self._tok.encode(text, add_special_tokens=False)
        return [self.bos_token_id, *ids] if add_bos and self.bos_token_id is not None else list(ids)

    def decode(self, ids: Sequence[int] | Iterable[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)


def load_tokenizer(path: str | os.PathLike[str], *, trust_remote_code: bool = False) -> Tokenizer:
    """The tokenizer a checkpoint directory declares (see the module docstring).

    Code shipped with a checkpoint (``auto_map`` in ``tokenizer_config.json``) is imported only
    with ``trust_remote_code=True``; otherwise transformers is told so explicitly and refuses
    instead of asking on the terminal."""
    path = Path(path)
    config_file = path / TOKENIZER_CONFIG_NAME
    config = read_json(config_file, TOKENIZER_CONFIG_NAME) if config_file.is_file() else {}
    if config.get("tokenizer_class") == BYTE_TOKENIZER_CLASS:
        return ByteTokenizer(bos_token_id=config.get("bos_token_id"), eos_token_id=config.get("eos_token_id"))
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ValueError(
            f"{path}: tokenizer is not the byte tokenizer ({TOKENIZER_CONFIG_NAME} has "
            f"tokenizer_class={config.get('tokenizer_class')!r}); install transformers to load it"
        ) from None
    try:
        hf = AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=bool(trust_remote_code))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: no usable tokenizer ({str(exc).splitlines()[0]})") from None
    return HFTokenizer(hf)
