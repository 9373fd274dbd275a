"""The n-gram speculators: prompt lookup over each request's own history, no weights.

:class:`NgramSpeculator` (method ``ngram``) matches on the host with the numba batch proposer
and, on a CUDA device, with the Triton kernel. :class:`NgramGPUSpeculator` (``ngram_gpu``)
always keeps the history on the engine's device: the Triton kernel on CUDA, its torch
reference elsewhere. Every path follows the rule of :mod:`specpath_ngram.matching`.
"""

from __future__ import annotations

import numpy as np
import torch

from specpath_engine.modeling.dispatch import triton_or_reference
from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, SpeculatorContext
from specpath_ngram.history import TokenHistory


class NgramSpeculator(BaseSpeculator):
    """Drafts the tokens that followed the earliest, longest earlier occurrence of each
    request's last ``prompt_lookup_min..prompt_lookup_max`` tokens."""

    def __init__(self, spec, context: SpeculatorContext) -> None:
        super().__init__(spec, context)
        self.min_n = int(spec.prompt_lookup_min)
        self.max_n = int(spec.prompt_lookup_max)
        self.k = int(spec.num_speculative_tokens)
        self.max_model_len = int(context.max_model_len)
        self.history = TokenHistory(slots=max(context.max_num_seqs, 1))
        self._on_device = self._uses_device_path(torch.device(context.device))
        if self._on_device:
            self._device_history = _DeviceMirror(torch.device(context.device))
            self._propose_kernel = _device_kernel(torch.device(context.device))
            self._warm_up_device(torch.device(context.device))
        else:
            from specpath_ngram import batch as ngram_batch

            self._batch = ngram_batch
            self._drafts = np.zeros((self.history.tokens.shape[0], max(self.k, 1)), np.int32)
            self._counts = np.zeros(self.history.tokens.shape[0], np.int32)
            ngram_batch.warm_up()  # compile or load the cache now, not on the first request

    def _uses_device_path(self, device: torch.device) -> bool:
        return device.type == "cuda"

    def _warm_up_device(self, device: torch.device) -> None:
        """Compile the kernel for this window now, not on the first real step."""
        tokens = torch.tensor([[1, 2, 1, 2]], dtype=torch.int32, device=device)
        one = torch.ones(1, dtype=torch.int32, device=device)
        self._propose_kernel(tokens, one * 0, one * 4, one, self.min_n, self.max_n, max(self.k, 1))

    def propose(self, batch: DraftBatch) -> DraftProposal:
        requests = batch.requests
        appended = [] if self._on_device else None
        rows, lengths = self.history.update(requests, appended)
        ks = np.fromiter((r.max_draft_tokens for r in requests), np.int32, len(requests))
        np.minimum(ks, self.k, out=ks)
        np.minimum(ks, self.max_model_len - lengths, out=ks)
        if self._on_device:
            return self._propose_on_device(rows, lengths, ks, appended)
        return self._propose_on_host(rows, lengths, ks)

    def _propose_on_host(self, rows, lengths, ks) -> DraftProposal:
        size = rows.shape[0]
        if self._counts.shape[0] < size:
            self._drafts = np.zeros((size, self._drafts.shape[1]), np.int32)
            self._counts = np.zeros(size, np.int32)
        drafts, counts = self._drafts[:size], self._counts[:size]
        self._batch.propose_batch_into(
            self.history.tokens, rows, lengths, ks, self.min_n, self.max_n, drafts, counts
        )
        flat = drafts[np.arange(drafts.shape[1]) < counts[:, None]]
        return DraftProposal(token_ids=torch.from_numpy(flat), num_draft_tokens=counts.tolist())

    def _propose_on_device(self, rows, lengths, ks, appended) -> DraftProposal:
        mirror = self._device_history
        tokens = mirror.sync(self.history.tokens.shape, appended)
        device = tokens.device
        rows_t, lengths_t, ks_t = (torch.from_numpy(a).to(device) for a in (rows, lengths, ks))
        k_max = max(self.k, 1)
        drafts, counts = self._propose_kernel(
            tokens, rows_t, lengths_t, ks_t, self.min_n, self.max_n, k_max
        )
        num_draft_tokens = counts.cpu().tolist()
        flat = drafts[torch.arange(k_max, device=device) < counts[:, None]]
        return DraftProposal(token_ids=flat, num_draft_tokens=num_draft_tokens)

    def remove_request(self, req_id: str) -> None:
        self.history.remove(req_id)


class NgramGPUSpeculator(NgramSpeculator):
    """``ngram_gpu``: the history lives on the engine's device and matching runs there."""

    def _uses_device_path(self, device: torch.device) -> bool:
        return True


def _device_kernel(device: torch.device):
    """The Triton kernel on CUDA, its torch reference anywhere else (same signature)."""
    return triton_or_reference(device, "specpath_ngram.kernels:propose_ngram_triton",
                               "specpath_ngram.reference:propose_ngram_reference")


class _DeviceMirror:
    """A device copy of :class:`TokenHistory`'s buffer, updated by replaying its writes in
    one host-to-device transfer per step."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.tokens = torch.zeros(0, 0, dtype=torch.int32, device=device)

    def sync(self, shape: tuple[int, int], appended: list) -> torch.Tensor:
        if tuple(self.tokens.shape) != tuple(shape):
            grown = torch.zeros(shape, dtype=torch.int32, device=self.device)
            slots, width = self.tokens.shape
            grown[:slots, :width] = self.tokens
            self.tokens = grown
        if appended:
            rows = np.concatenate([np.full(len(new), row, np.int64) for row, _, new in appended])
            cols = np.concatenate([np.arange(start, start + len(new)) for _, start, new in appended])
            values = np.concatenate([new for _, _, new in appended])
            index = torch.from_numpy(rows * shape[1] + cols).to(self.device)
            self.tokens.view(-1).index_copy_(0, index, torch.from_numpy(values).to(self.device))
        return self.tokens
