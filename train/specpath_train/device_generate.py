"""The data stage's generation on an accelerator (``specpath train --device cuda``).

specpath's engine decodes on the CPU; a GPU answers thousands of prompts at once, which is what
makes ten million tokens of self-distilled data a few minutes' work instead of hours. The
decoding is :mod:`specpath_train.batch_decode` (specpath's own model, a static KV cache, wide
batches) over the same checkpoint directory, in bf16. (``transformers``' ``generate`` did this
job first: 5,913 new tokens/s at batch 2048 on an H200, 0.2 s a step.)

:class:`DeviceGenerator` offers the two calls the data stage makes of a generator:

- ``generate_ids(prompts, ...)``: prompt + response ids per prompt, EOS kept as the last token
  of a response that stopped (what :func:`specpath_train.target_text.generate` returns);
- ``generate(texts, params)``: results with ``.text`` and ``.finish_reason`` (``stop`` at an
  EOS or at one of ``params[i].stop``'s strings, else ``length``), the part of
  :class:`~specpath_engine.llm.LLM`'s API that :func:`specpath_train.prompt_mix.self_instruct` uses.

Rows are batched by length (left padding) up to ``max_batch_tokens`` of prompt and response.
Sampling is seeded per batch, not per request: a run is repeatable on one device and batch size.

Example::

    gen = DeviceGenerator("runs/x/run/target", device="cuda")
    seqs = gen.generate_ids([[1, 2, 3]], max_new_tokens=64, temperature=0.0, eos_token_ids=[2], seed=0)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from specpath_train.batch_decode import decode


@attrs.frozen(kw_only=True)
class TextResult:
    """One ``generate`` result: the response's text and why it ended."""

    text: str
    finish_reason: str  # "stop" (EOS or a stop string) or "length"


class DeviceGenerator:
    """The target at ``target_dir`` on ``device`` (in ``dtype``), decoding batches of prompts."""

    def __init__(self, target_dir: str | Path, *, device: str, dtype: torch.dtype = torch.bfloat16,
                 max_batch_tokens: int = 1 << 20, max_batch: int = 2048) -> None:
        import json

        from tokenizers import Tokenizer

        from specpath_engine.model import LlamaModel

        self.device = device
        self.model = LlamaModel.from_pretrained(str(target_dir), dtype=dtype, device=device)
        self.tokenizer = Tokenizer.from_file(str(Path(target_dir) / "tokenizer.json"))
        eos = json.loads((Path(target_dir) / "config.json").read_text()).get("eos_token_id")
        self.eos = [eos] if isinstance(eos, int) else list(eos or ())
        self.max_batch_tokens = max_batch_tokens  # rows x (longest prompt + new tokens) per batch
        self.max_batch = max_batch

    def batches(self, lengths: Sequence[int], new_tokens: int) -> list[list[int]]:
        """Row indices by batch: shortest prompts first, each batch within the token budget."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        out: list[list[int]] = []
        for i in order:
            if out and len(out[-1]) < self.max_batch and \
                    (len(out[-1]) + 1) * (lengths[i] + new_tokens) <= self.max_batch_tokens:
                out[-1].append(i)
            else:
                out.append([i])
        return out

    def generate_ids(self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, temperature: float,
                     eos_token_ids: Sequence[int], seed: int, top_p: float = 1.0) -> list[list[int]]:
        """Prompt + response ids of every prompt, in the prompts' order."""
        out: list[list[int]] = [[] for _ in prompts]
        for b, rows in enumerate(self.batches([len(p) for p in prompts], max_new_tokens)):
            new = decode(self.model, [prompts[i] for i in rows], max_new_tokens=max_new_tokens,
                         temperature=temperature, top_p=top_p, eos_token_ids=eos_token_ids, seed=seed + b)
            for i, n in zip(rows, new):
                out[i] = list(prompts[i]) + n
        return out

    def generate(self, texts: Sequence[str], params: Sequence[Any]) -> list[TextResult]:
        """Each text continued under its sampling params (temperature, top_p, max_tokens and
        stop strings are read from the first: the data stage asks for one kind at a time)."""
        first = params[0]
        eos = self.eos_token_ids()
        prompts = [self.tokenizer.encode(t, add_special_tokens=False).ids for t in texts]
        seqs = self.generate_ids(prompts, max_new_tokens=first.max_tokens, temperature=first.temperature,
                                 eos_token_ids=eos, seed=int(first.seed or 0), top_p=first.top_p)
        results = []
        for prompt, seq in zip(prompts, seqs):
            new = seq[len(prompt):]
            stopped = bool(new) and new[-1] in eos
            text = self.tokenizer.decode(new[:-1] if stopped else new, skip_special_tokens=False)
            for s in getattr(first, "stop", ()) or ():
                if s in text:
                    text, stopped = text[:text.index(s)], True
            results.append(TextResult(text=text, finish_reason="stop" if stopped else "length"))
        return results

    def eos_token_ids(self) -> list[int]:
        return list(self.eos)
