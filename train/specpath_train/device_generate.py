"""The data stage's generation on an accelerator (``specpath train --device cuda``).

specpath's engine decodes on the CPU; a GPU answers thousands of prompts at once, which is what
makes ten million tokens of self-distilled data a few minutes' work instead of hours. Its
decoding here is ``transformers``' (``pip install transformers``: the GPU machines have it;
the CPU path never imports it) over the same checkpoint directory, in bf16.

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


@attrs.frozen(kw_only=True)
class TextResult:
    """One ``generate`` result: the response's text and why it ended."""

    text: str
    finish_reason: str  # "stop" (EOS or a stop string) or "length"


class DeviceGenerator:
    """The target at ``target_dir`` on ``device`` (in ``dtype``), decoding batches with transformers."""

    def __init__(self, target_dir: str | Path, *, device: str, dtype: torch.dtype = torch.bfloat16,
                 max_batch_tokens: int = 1 << 20, max_batch: int = 2048) -> None:
        from tokenizers import Tokenizer
        from transformers import LlamaForCausalLM

        self.device = device
        self.model = LlamaForCausalLM.from_pretrained(str(target_dir), dtype=dtype).to(device).eval()
        self.tokenizer = Tokenizer.from_file(str(Path(target_dir) / "tokenizer.json"))
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

    @torch.inference_mode()
    def _decode(self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                eos_token_ids: Sequence[int], seed: int) -> list[list[int]]:
        """The new ids of each prompt (up to and including the first EOS), one batch."""
        width = max(len(p) for p in prompts)
        pad = eos_token_ids[0] if eos_token_ids else 0
        ids = torch.full((len(prompts), width), pad, dtype=torch.int64)
        mask = torch.zeros((len(prompts), width), dtype=torch.int64)
        for r, p in enumerate(prompts):  # left padding: every row's last prompt token is at width - 1
            ids[r, width - len(p):] = torch.tensor(list(p), dtype=torch.int64)
            mask[r, width - len(p):] = 1
        torch.manual_seed(seed)
        sample = temperature > 0
        out = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                  max_new_tokens=max_new_tokens, do_sample=sample,
                                  temperature=temperature if sample else None, top_p=top_p if sample else None,
                                  top_k=0 if sample else None, eos_token_id=list(eos_token_ids) or None,
                                  pad_token_id=pad)
        new = out[:, width:].tolist()
        eos = set(eos_token_ids)
        result = []
        for row in new:
            end = next((j for j, t in enumerate(row) if t in eos), None)
            result.append(row if end is None else row[:end + 1])
        return result

    def generate_ids(self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, temperature: float,
                     eos_token_ids: Sequence[int], seed: int, top_p: float = 1.0) -> list[list[int]]:
        """Prompt + response ids of every prompt, in the prompts' order."""
        out: list[list[int]] = [[] for _ in prompts]
        for b, rows in enumerate(self.batches([len(p) for p in prompts], max_new_tokens)):
            new = self._decode([prompts[i] for i in rows], max_new_tokens=max_new_tokens, temperature=temperature,
                               top_p=top_p, eos_token_ids=eos_token_ids, seed=seed + b)
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
        eos = self.model.generation_config.eos_token_id
        return [eos] if isinstance(eos, int) else list(eos or ())
