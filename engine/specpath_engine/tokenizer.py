"""Tokenizers for the engine and the CLI, made in one place: :func:`load_tokenizer`.

What a checkpoint gets, in order:

1. ``tokenizer_config.json`` says ``{"tokenizer_class": "ByteTokenizer"}``: the byte-level
   tokenizer of the embedded model. It reads raw UTF-8 bytes (ids 0..255); NUL (id 0) never
   occurs in source code, so it is both EOS and BOS; prompts are encoded without it by default
   because training windows mostly start mid-file.
2. A GGUF file: the BPE tokenizer rebuilt from its metadata (``specpath_engine.modeling.gguf``).
3. A directory with ``tokenizer.json``: loaded with the ``tokenizers`` library (no transformers).
4. Anything else is handed to ``transformers``' ``AutoTokenizer``, if installed, with
   ``trust_remote_code`` exactly as the caller passed it (default False: never code from a
   checkpoint unless asked).

Every tokenizer has the small interface of :class:`Tokenizer`, including the checkpoint's chat
template (None when it has none).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, Sequence

from specpath_engine.modeling.checkpoint import TOKENIZER_CONFIG_NAME, read_json

BYTE_TOKENIZER_CLASS = "ByteTokenizer"
TOKENIZER_JSON_NAME = "tokenizer.json"


class Tokenizer(Protocol):
    vocab_size: int
    bos_token_id: int | None
    eos_token_id: int | None
    #: Jinja chat template of the checkpoint (None: no chat format)
    chat_template: str | None
    bos_token: str | None
    eos_token: str | None

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...


class ByteTokenizer:
    """UTF-8 bytes as token ids; decoding replaces invalid sequences and skips ids >= 256."""

    vocab_size = 256
    chat_template = None
    bos_token = eos_token = None

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


def _token_text(value: Any) -> str | None:
    """A special token as ``tokenizer_config.json`` writes it: a string or an AddedToken dict."""
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) else None


class FastTokenizer:
    """A ``tokenizers.Tokenizer`` plus the special tokens and chat template of its config."""

    def __init__(self, tokenizer: Any, config: Mapping[str, Any]) -> None:
        self._tok = tokenizer
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        self.bos_token_id = None if self.bos_token is None else tokenizer.token_to_id(self.bos_token)
        self.eos_token_id = None if self.eos_token is None else tokenizer.token_to_id(self.eos_token)
        template = config.get("chat_template")
        if isinstance(template, list):  # the named-templates form: [{"name": "default", "template": ...}]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
            template = named.get("default")
        self.chat_template = template if isinstance(template, str) else None

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]:
        ids = self._tok.encode(text, add_special_tokens=False).ids
        return [self.bos_token_id, *ids] if add_bos and self.bos_token_id is not None else ids

    def decode(self, ids: Sequence[int] | Iterable[int]) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=True)


class HFTokenizer:
    """Adapter giving a ``transformers`` tokenizer the small interface above."""

    def __init__(self, hf_tokenizer: Any) -> None:
        self._tok = hf_tokenizer
        self.vocab_size = len(hf_tokenizer)
        self.bos_token_id = hf_tokenizer.bos_token_id
        self.eos_token_id = hf_tokenizer.eos_token_id
        self.bos_token = hf_tokenizer.bos_token
        self.eos_token = hf_tokenizer.eos_token
        template = getattr(hf_tokenizer, "chat_template", None)
        self.chat_template = template if isinstance(template, str) else None

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]:
        ids = self._tok.encode(text, add_special_tokens=False)
        return [self.bos_token_id, *ids] if add_bos and self.bos_token_id is not None else list(ids)

    def decode(self, ids: Sequence[int] | Iterable[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)


def _tokenizers_library(path: Path) -> Any:
    try:
        import tokenizers
    except ImportError:
        raise ValueError(f"{path}: loading its tokenizer needs the tokenizers package (pip install tokenizers)") from None
    return tokenizers


def load_tokenizer(path: str | os.PathLike[str], *, trust_remote_code: bool = False) -> Tokenizer:
    """The tokenizer a checkpoint directory or GGUF file declares (see the module docstring)."""
    from specpath_engine.modeling.gguf import is_gguf, read_gguf

    path = Path(path)
    if is_gguf(path):
        _tokenizers_library(path)
        checkpoint = read_gguf(path)
        return FastTokenizer(checkpoint.tokenizer(), checkpoint.tokenizer_config)
    config_file = path / TOKENIZER_CONFIG_NAME
    config = read_json(config_file, TOKENIZER_CONFIG_NAME) if config_file.is_file() else {}
    if config.get("tokenizer_class") == BYTE_TOKENIZER_CLASS:
        return ByteTokenizer(bos_token_id=config.get("bos_token_id"), eos_token_id=config.get("eos_token_id"))
    if (path / TOKENIZER_JSON_NAME).is_file():
        tokenizers = _tokenizers_library(path)
        try:
            return FastTokenizer(tokenizers.Tokenizer.from_file(str(path / TOKENIZER_JSON_NAME)), config)
        except Exception as exc:  # noqa: BLE001 - the Rust library raises its own Exception type
            raise ValueError(f"{path / TOKENIZER_JSON_NAME}: not a usable tokenizer ({str(exc).splitlines()[0]})") from None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ValueError(
            f"{path}: no {TOKENIZER_JSON_NAME} and the tokenizer is not the byte tokenizer "
            f"({TOKENIZER_CONFIG_NAME} has tokenizer_class={config.get('tokenizer_class')!r}); "
            f"install transformers to load it"
        ) from None
    try:
        return HFTokenizer(
            AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=trust_remote_code)
        )
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: no usable tokenizer ({str(exc).splitlines()[0]})") from None
    return HFTokenizer(hf)
