"""Tiny random-weight draft checkpoints for the tests, written once per process.

``self`` is the kit's tiny target itself (so greedy drafts are all accepted and the KV rollback
of full acceptance is exercised); ``sharp`` is a target with peaked distributions and
``sharp_near`` / ``sharp_near_pard`` are it with noisy weights (drafts often, not always, accepted); ``random`` and ``pard`` are small unrelated drafts
(drafts mostly rejected); ``bpe`` has a small BPE vocabulary trained on a few stdlib files.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import torch

from specpath_engine.model import LlamaModel
from specpath_engine.testing.engine import random_llama, tiny_checkpoint, tiny_target
from specpath_draft_model.config import PARD_TOKEN_KEY

_ROOT: Path | None = None


def _random(seed: int, vocab_size: int = 256) -> LlamaModel:
    model = random_llama(seed, vocab_size=vocab_size, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    with torch.no_grad():
        for p in model.parameters():  # sharper logits than the default init, so drafts vary
            p.mul_(3.0)
    return model


def _sharp() -> LlamaModel:
    """The tiny target with a 6x head: peaked next-token distributions, on which a verification
    that mishandled draft probabilities would be visibly biased."""
    model = tiny_target()
    with torch.no_grad():
        model.lm_head.weight.mul_(6.0)
    return model


def _near(base: LlamaModel, seed: int = 4, noise: float = 0.5) -> LlamaModel:
    """``base`` with noise added to every weight: a draft that agrees with it often, not always."""
    model = LlamaModel(base.config)
    model.load_state_dict(base.state_dict())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * noise * p.std())
    return model


def root() -> Path:
    """Write the checkpoints (first call) and return their folder."""
    global _ROOT
    if _ROOT is None:
        _ROOT = Path(tempfile.mkdtemp(prefix="specpath-draft-model-tests-"))
        atexit.register(shutil.rmtree, _ROOT, True)
        tiny_target().save_pretrained(_ROOT / "self")
        sharp = _sharp()
        sharp.save_pretrained(_ROOT / "sharp")
        near = _near(sharp)
        near.save_pretrained(_ROOT / "sharp_near")
        near.save_pretrained(_ROOT / "sharp_near_pard", extra_config={PARD_TOKEN_KEY: 255})
        _random(1).save_pretrained(_ROOT / "random")
        _random(2).save_pretrained(_ROOT / "pard", extra_config={PARD_TOKEN_KEY: 255})
        tokenizer = bpe_tokenizer()
        _random(3, vocab_size=tokenizer.get_vocab_size()).save_pretrained(_ROOT / "bpe")
        tokenizer.save(str(_ROOT / "bpe" / "tokenizer.json"))
    return _ROOT


def path(name: str) -> str:
    return str(root() / name)


def target() -> str:
    """The kit's tiny byte-level target checkpoint."""
    return tiny_checkpoint()


def bpe_tokenizer(vocab_size: int = 320):
    """A small BPE vocabulary over a few stdlib files (well under a second)."""
    from specpath_engine.corpus import stdlib_root
    from specpath_draft_model.vocab import build_bpe_tokenizer

    names = ("abc.py", "bisect.py", "colorsys.py")
    return build_bpe_tokenizer([(stdlib_root() / name).read_bytes() for name in names], vocab_size)
