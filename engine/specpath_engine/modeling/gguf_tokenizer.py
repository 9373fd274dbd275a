"""A ``tokenizers`` tokenizer (``tokenizer.json``) rebuilt from a GGUF file's vocabulary metadata.

GGUF stores byte-level BPE vocabularies as ``tokenizer.ggml.tokens`` / ``token_type`` / ``merges``
plus the *name* of the pre-tokeniser (``tokenizer.ggml.pre``); the regexes behind each name live in
llama.cpp. The names handled here and their pre-tokenisation:

``default``/``gpt2``  GPT-2's regex (ByteLevel with its own regex)
``smollm``            every digit on its own, then GPT-2's regex (SmolLM, StarCoder family)
``llama-bpe``         Llama 3's regex (digits in runs of at most three), then bytes
``qwen2``             Qwen2's regex (single digits), NFC normalisation, then bytes

The result encodes exactly as the model was trained and decodes back to the same text
(byte-level: no text is lost). transformers' own GGUF tokenizer drops the ``smollm`` digit split,
which is why this is built here.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

# llama.cpp token types (gguf.TokenType): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
_SPECIAL_TYPES = (2, 3, 4)

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
PRE_TOKENIZERS = ("default", "gpt2", "smollm", "llama-bpe", "qwen2")


def _pre_tokenizer(pre: str) -> tuple[Any, Any]:
    """(normalizer or None, pre-tokenizer) for a llama.cpp pre-tokeniser name."""
    from tokenizers import Regex, normalizers, pre_tokenizers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    raw_bytes = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if pre in ("default", "gpt2"):
        return None, byte_level
    if pre == "smollm":
        return None, pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    if pre == "llama-bpe":
        return None, pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(_LLAMA3_SPLIT), behavior="isolated", invert=False), raw_bytes]
        )
    if pre == "qwen2":
        split = pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated", invert=False)
        return normalizers.NFC(), pre_tokenizers.Sequence([split, raw_bytes])
    raise ValueError(f"tokenizer pre-tokeniser {pre!r} is not supported; allowed: {', '.join(PRE_TOKENIZERS)}")


def build_tokenizer(
    *, model: str | None, pre: str | None, tokens: Sequence[str], token_types: Sequence[int], merges: Sequence[str]
) -> Any:
    """A ``tokenizers.Tokenizer`` for a GGUF byte-level BPE vocabulary (ValueError otherwise)."""
    from tokenizers import AddedToken, Tokenizer, decoders
    from tokenizers.models import BPE

    if model != "gpt2":
        raise ValueError(f"tokenizer model {model!r} is not supported; allowed: gpt2 (byte-level BPE)")
    normalizer, pre_tokenizer = _pre_tokenizer(pre or "default")
    vocab = {token: i for i, token in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ValueError("tokenizer vocabulary has duplicate tokens")
    pairs = []
    for merge in merges:
        left, sep, right = merge.partition(" ")
        if not sep:
            raise ValueError(f"tokenizer merge {merge!r} is not two tokens separated by a space")
        pairs.append((left, right))
    try:
        tokenizer = Tokenizer(BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    except Exception as exc:  # noqa: BLE001 - the Rust library raises a bare Exception (a merge out of vocabulary)
        raise ValueError(f"tokenizer.ggml.merges: {' '.join(str(exc).split())[:160]}") from None
    if normalizer is not None:
        tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    special = [
        AddedToken(tokens[i], special=True, normalized=False)
        for i, kind in enumerate(token_types)
        if kind in _SPECIAL_TYPES
    ]
    tokenizer.add_special_tokens(special)
    return tokenizer


def tokenizer_config_dict(
    *,
    tokens: Sequence[str],
    special_ids: Mapping[str, int | None],
    add_bos: bool,
    chat_template: str | None,
    max_length: int,
) -> dict[str, Any]:
    """``tokenizer_config.json`` for ``transformers``' ``PreTrainedTokenizerFast``.

    ``PreTrainedTokenizerFast`` takes ``tokenizer.json`` as written; naming a slow class such
    as ``GPT2Tokenizer`` makes transformers rebuild the pre-tokeniser and lose the digit split.
    """
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": add_bos,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_length,
    }
    for role, token_id in special_ids.items():
        if token_id is not None and 0 <= int(token_id) < len(tokens):
            config[f"{role}_token"] = tokens[int(token_id)]
    if chat_template:
        config["chat_template"] = chat_template
    return config
