"""``rejection_sample``: verify a step's drafts for a whole batch in one call.

Layout (the one engines already use): the drafts of all requests flattened in batch order,
``num_draft_tokens`` per request, the target's logits at every draft position, one bonus token
per request (sampled by the engine at the position after the last draft). Every mode reduces
to the same two steps: a kernel decides how many drafts each request keeps, then rejected
random rows sample their corrected token from a residual distribution. All randomness is
drawn up front, per request, from that request's own generator.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Sequence

import torch

from specpath_engine.sample import randomness
from specpath_engine.modeling.dispatch import triton_or_reference
from specpath_engine.sample.processing import GREEDY_EPS, target_probs
from specpath.verification import LOSSLESS_METHODS, acceptance_length_to_rates, check_rates, conditional_rates

PLACEHOLDER_TOKEN_ID = -1
"""Pads each output row after its emitted tokens."""

METHOD_OPTIONS: dict[str, frozenset[str]] = {
    "standard": frozenset({"vocab_mapping"}),
    "block": frozenset({"vocab_mapping"}),
    "synthetic": frozenset({"vocab_mapping", "acceptance_rates", "acceptance_length"}),
    "fly": frozenset({"vocab_mapping", "window", "entropy_threshold", "entropy_top_k"}),
}
"""Verification modes and the keyword options each accepts."""


COLUMN_WISE_MIN_ELEMENTS = 1 << 20
"""On the torch path, standard verification (and greedy-only block verification) of at least
this many logits (positions x vocab) walks the draft positions one column at a time and
processes only the rows it reaches, as a per-request loop would, but for the whole batch at
once. Same result as the full pass; below this size one full pass costs less."""

_warned_lossy: set[str] = set()


def rejection_sample(
    draft_token_ids: torch.Tensor,
    num_draft_tokens: Sequence[int] | torch.Tensor,
    target_logits: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    temperature: torch.Tensor | Sequence[float],
    *,
    draft_probs: torch.Tensor | None = None,
    generators: Sequence[torch.Generator | int | None] | None = None,
    top_k: torch.Tensor | Sequence[int] | None = None,
    top_p: torch.Tensor | Sequence[float] | None = None,
    method: str = "standard",
    backend: str = "auto",
    **method_options,
) -> torch.Tensor:
    """Verify drafts; int32 ``[batch, max(num_draft_tokens) + 1]`` of emitted tokens per request
    (accepted drafts, then the corrected or bonus token), padded with ``PLACEHOLDER_TOKEN_ID``.

    ``temperature`` 0 marks a greedy request; ``draft_probs`` None means one-hot drafts;
    ``generators`` holds one ``torch.Generator`` (or int seed, or None) per request. ``method``
    is one of ``METHOD_OPTIONS``; its options come as keywords. ``vocab_mapping``
    (:class:`specpath_engine.sample.tli.VocabMapping`) means drafts and ``draft_probs`` are in the
    drafter's vocabulary and are verified in the target's (TLI). ``backend`` picks the kernels
    ("auto": torch on CPU, Triton on CUDA).
    """
    # 1. Check every input; one line per problem.
    _check_method(method, method_options)
    if not isinstance(target_logits, torch.Tensor) or target_logits.dim() != 2 or not target_logits.is_floating_point():
        raise ValueError(f"target_logits must be a float tensor [sum(num_draft_tokens), vocab], got {_describe(target_logits)}")
    device = target_logits.device
    total, vocab = target_logits.shape
    kernels = triton_or_reference(device, "specpath_engine.sample.triton_kernels", "specpath_engine.sample.reference",
                                  backend)
    counts, draft_token_ids, bonus_token_ids, temperature, draft_probs, gens, top_k, top_p = _checked_inputs(
        draft_token_ids, num_draft_tokens, total, vocab, bonus_token_ids, temperature, draft_probs, generators,
        top_k, top_p, method_options.get("vocab_mapping"), kernels, device,
    )
    batch = len(counts)
    if method not in LOSSLESS_METHODS and method not in _warned_lossy:
        _warned_lossy.add(method)
        warnings.warn(f"rejection_sample(method={method!r}) is lossy: output no longer follows the target distribution", stacklevel=2)

    max_k = max(counts, default=0)
    out = torch.full((batch, max_k + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32, device=device)
    if max_k == 0:
        out[:, 0] = bonus_token_ids
        return out

    # 2. How many drafts each request keeps.
    greedy_list = (temperature < GREEDY_EPS).tolist()
    per_token = torch.tensor(counts, device=device)
    cu = torch.zeros(batch + 1, dtype=torch.long, device=device)
    cu[1:] = per_token.cumsum(0)
    on_torch = kernels.__name__.endswith("reference")
    column_wise = on_torch and total * vocab >= COLUMN_WISE_MIN_ELEMENTS
    if on_torch and not column_wise and method in LOSSLESS_METHODS and all(greedy_list):
        return _all_greedy(draft_token_ids, per_token, cu, target_logits, bonus_token_ids, out)
    is_greedy = torch.tensor(greedy_list, device=device)
    greedy_tok = is_greedy.repeat_interleave(per_token, output_size=total)
    process = _target_processing(target_logits, per_token, temperature, top_k, top_p)

    needs = [True] * batch if method == "synthetic" else [not g for g in greedy_list]
    uniforms, recovery = randomness.draw_uniforms(needs, counts, gens, device)
    scale, probs, argmax, rejected_probs = None, None, None, None
    if method == "synthetic":
        rates = torch.tensor(conditional_rates(_synthetic_rates(method_options, max_k)), device=device)
        num = kernels.accept_synthetic(cu, rates, uniforms)
    elif column_wise and (method == "standard" or (method == "block" and all(greedy_list))):
        num, argmax, rejected_probs = _standard_by_column(draft_token_ids, per_token, cu, greedy_tok, target_logits,
                                                          process, draft_probs, uniforms)
    else:
        num, scale, argmax, probs = _accept_full_pass(
            kernels, method, method_options, draft_token_ids, counts, cu, target_logits, process, draft_probs,
            uniforms, greedy_list, is_greedy, greedy_tok)

    # 3. The token after the kept drafts: the bonus, or a corrected token at the first rejection.
    final = _final_tokens(kernels, method, bonus_token_ids, num, counts, cu, greedy_list, is_greedy, target_logits,
                          process, draft_token_ids, draft_probs, argmax, probs, rejected_probs, scale, recovery)
    # 4. Rows: kept drafts, the final token, placeholders.
    return _emitted_rows(out, draft_token_ids, cu, num, final, total)


def _target_processing(target_logits, per_token, temperature, top_k, top_p):
    """``process(rows)``: the target's processed probabilities at flattened positions ``rows``
    (each position takes its request's temperature, top-k and top-p)."""
    total = target_logits.shape[0]
    temp_tok = temperature.repeat_interleave(per_token, output_size=total)
    top_k_tok = None if top_k is None else top_k.repeat_interleave(per_token, output_size=total)
    top_p_tok = None if top_p is None else top_p.repeat_interleave(per_token, output_size=total)

    def process(rows: torch.Tensor) -> torch.Tensor:
        return target_probs(target_logits.index_select(0, rows), temp_tok[rows], None if top_k is None else top_k_tok[rows],
                            None if top_p is None else top_p_tok[rows])

    return process


def _accept_full_pass(kernels, method, method_options, draft_token_ids, counts, cu, target_logits, process,
                      draft_probs, uniforms, greedy_list, is_greedy, greedy_tok):
    """Step 2 over every position at once (standard, block, fly): the target's argmax where a
    row is greedy, its processed probabilities where one is random, then the mode's kernel.
    Returns ``(num [batch], block scale or None, argmax [total], probs [total, vocab] or None)``."""
    total, vocab = target_logits.shape
    device = target_logits.device
    scale, probs = None, None
    argmax = torch.zeros(total, dtype=torch.long, device=device)
    if all(greedy_list):
        argmax = target_logits.argmax(-1)
    elif any(greedy_list):
        argmax[greedy_tok] = target_logits[greedy_tok].argmax(-1)
    if method == "fly" or not any(greedy_list):
        probs = process(torch.arange(total, device=device))
    elif not all(greedy_list):
        probs = torch.zeros(total, vocab, device=device)
        probs[~greedy_tok] = process((~greedy_tok).nonzero().squeeze(1))
    args = (draft_token_ids, cu, argmax, probs, draft_probs, uniforms, is_greedy)
    if method == "standard":
        num = kernels.accept_standard(*args)
    elif method == "block":
        num, scale = kernels.accept_block(*args)
    else:
        high, window = _fly_gates(method_options, probs, counts, device)
        num = kernels.accept_fly(*args, high, window)
    return num, scale, argmax, probs


def _final_tokens(kernels, method, bonus_token_ids, num, counts, cu, greedy_list, is_greedy, target_logits, process,
                  draft_token_ids, draft_probs, argmax, probs, rejected_probs, scale, recovery) -> torch.Tensor:
    """Step 3: per request the bonus token where every draft was kept, else the token at its
    first rejection (the target's argmax for a greedy row, a residual sample for a random one)."""
    final = bonus_token_ids.clone()
    batch = len(counts)
    device = cu.device
    num_list = num.tolist()
    rejected = [r for r in range(batch) if num_list[r] < counts[r]]
    if rejected:
        rej = torch.tensor(rejected, device=device)
        rows = cu[rej] + num.long()[rej]
        greedy_rej = is_greedy[rej]
        if any(greedy_list[r] for r in rejected):
            at = rows[greedy_rej]
            best = argmax[at] if argmax is not None else target_logits[at].argmax(-1)
            final[rej[greedy_rej]] = best.to(final.dtype)
        if not all(greedy_list[r] for r in rejected):
            who, at = rej[~greedy_rej], rows[~greedy_rej]
            if probs is not None:
                at_probs = probs[at]
            elif rejected_probs is not None:
                at_probs = rejected_probs[who]
            else:
                at_probs = process(at)
            tokens = kernels.recover(
                at_probs,
                None if draft_probs is None else draft_probs[at],
                draft_token_ids[at],
                torch.arange(who.numel(), device=device),
                scale[who] if scale is not None else torch.ones(who.numel(), device=device),
                recovery[who],
                method != "synthetic",
            )
            final[who] = tokens.to(final.dtype)
    return final


def _emitted_rows(out, draft_token_ids, cu, num, final, total) -> torch.Tensor:
    """Step 4: ``out``'s rows are the kept drafts, then the final token, then placeholders."""
    max_k = out.shape[1] - 1
    device = out.device
    position = torch.arange(max_k, device=device)
    index = (cu[:-1, None] + position).clamp(max=max(total - 1, 0))
    kept = position < num.long()[:, None]
    out[:, :max_k] = torch.where(kept, draft_token_ids[index].to(torch.int32), PLACEHOLDER_TOKEN_ID)
    out.scatter_(1, num.long()[:, None], final.to(torch.int32)[:, None])
    return out


def _all_greedy(draft_ids, per_token, cu, logits, bonus, out) -> torch.Tensor:
    """The torch path when every row is greedy (standard and block agree there): keep drafts
    while they equal the target argmax; a dozen batched ops, no randomness, no host sync."""
    max_k = out.shape[1] - 1
    position = torch.arange(max_k, device=cu.device)
    index = (cu[:-1, None] + position).clamp(max=draft_ids.numel() - 1)
    argmax = logits.argmax(-1)
    drafts = draft_ids.long()[index]
    match = (argmax[index] == drafts) & (position < per_token[:, None])
    num = match.int().cumprod(1).sum(1)
    final = torch.where(num < per_token, argmax[index.gather(1, num.clamp(max=max_k - 1)[:, None]).squeeze(1)],
                        bonus.long())
    out[:, :max_k] = torch.where(position < num[:, None], drafts, PLACEHOLDER_TOKEN_ID).to(torch.int32)
    return out.scatter_(1, num[:, None].long(), final.to(torch.int32)[:, None])


def _standard_by_column(draft_ids, per_token, cu, greedy_tok, logits, process, draft_probs, uniforms):
    """Token-wise acceptance, position by position over the requests still accepting, touching
    only the logits rows a per-request loop would touch. Returns (int32 [B] drafts accepted,
    int64 [T] target argmax filled at the greedy positions visited, float32 [B, V] processed
    target probabilities at each random request's rejected position, or None)."""
    batch = per_token.numel()
    num = torch.zeros(batch, dtype=torch.int32, device=cu.device)
    argmax = torch.zeros(draft_ids.numel(), dtype=torch.long, device=cu.device)
    rejected_probs = None
    # With one K for every request, a whole column is a strided view of the logits (no copy).
    k = int(per_token[0]) if batch and logits.is_contiguous() and bool((per_token == per_token[0]).all()) else 0
    alive = (per_token > 0).nonzero().squeeze(1)
    column = 0
    while alive.numel():
        t = cu[alive] + column
        x = draft_ids[t].long()
        greedy = greedy_tok[t]
        ok = torch.empty(t.numel(), dtype=torch.bool, device=cu.device)
        if bool(greedy.all()):
            column_rows = logits.view(batch, k, -1)[:, column] if k and t.numel() == batch else logits.index_select(0, t)
            argmax[t] = column_rows.argmax(-1)
            ok = argmax[t] == x
        elif bool(greedy.any()):
            tg = t[greedy]
            argmax[tg] = logits.index_select(0, tg).argmax(-1)
            ok[greedy] = argmax[tg] == x[greedy]
        if not bool(greedy.all()):
            tr, xr = t[~greedy], x[~greedy]
            rows = process(tr)
            p = rows[torch.arange(tr.numel(), device=cu.device), xr]
            q = draft_probs[tr, xr] if draft_probs is not None else torch.ones_like(p)
            accepted = uniforms[tr] * q < p
            ok[~greedy] = accepted
            if not bool(accepted.all()):
                if rejected_probs is None:
                    rejected_probs = torch.empty(per_token.numel(), rows.shape[1], device=cu.device)
                rejected_probs[alive[~greedy][~accepted]] = rows[~accepted]
        alive = alive[ok]
        num[alive] += 1
        column += 1
        alive = alive[per_token[alive] > column]
    return num, argmax, rejected_probs


# ---------------------------------------------------------------- options and validation


def _checked_inputs(draft_token_ids, num_draft_tokens, total, vocab, bonus_token_ids, temperature, draft_probs,
                    generators, top_k, top_p, mapping, kernels, device):
    """Validate and normalise the per-call inputs (tensors on ``device``; drafts in the target's
    vocabulary, lifted through ``mapping`` when given)."""
    counts = _counts(num_draft_tokens)
    batch = len(counts)
    draft_token_ids = _int_vector("draft_token_ids", draft_token_ids, sum(counts), device)
    bonus_token_ids = _int_vector("bonus_token_ids", bonus_token_ids, batch, device)
    temperature = _float_vector("temperature", temperature, batch, device)
    if total != sum(counts):
        raise ValueError(f"target_logits has {total} rows but num_draft_tokens sums to {sum(counts)}")
    if bool((temperature < 0).any()) or not bool(torch.isfinite(temperature).all()):
        raise ValueError("temperature must be finite and >= 0 (0 = greedy)")
    if mapping is not None:
        draft_token_ids, draft_probs = mapping.to_target(draft_token_ids, draft_probs, kernels=kernels)
        if mapping.target_vocab_size != vocab:
            raise ValueError(f"vocab_mapping targets a vocabulary of {mapping.target_vocab_size}, target_logits has {vocab}")
    if total and (int(draft_token_ids.min()) < 0 or int(draft_token_ids.max()) >= vocab):
        raise ValueError(f"draft_token_ids must lie in [0, {vocab}); got ids in [{int(draft_token_ids.min())}, {int(draft_token_ids.max())}]")
    if draft_probs is not None:
        if not isinstance(draft_probs, torch.Tensor) or tuple(draft_probs.shape) != (total, vocab):
            raise ValueError(f"draft_probs must be a tensor [{total}, {vocab}] or None, got {_describe(draft_probs)}")
        draft_probs = draft_probs.float()
    gens = randomness.resolve_generators(generators, batch)
    if len(gens) != batch:
        raise ValueError(f"generators has {len(gens)} entries for {batch} requests")
    if top_k is not None:
        top_k = _int_vector("top_k", top_k, batch, device)
    if top_p is not None:
        top_p = _float_vector("top_p", top_p, batch, device)
        if bool(((top_p <= 0) | (top_p > 1)).any()):
            raise ValueError("top_p must lie in (0, 1]")
    return counts, draft_token_ids, bonus_token_ids, temperature, draft_probs, gens, top_k, top_p


def _check_method(method, options) -> None:
    if method not in METHOD_OPTIONS:
        close = difflib.get_close_matches(str(method), METHOD_OPTIONS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"method={method!r} is not one of {', '.join(map(repr, METHOD_OPTIONS))}{hint}")
    unknown = sorted(set(options) - METHOD_OPTIONS[method])
    if unknown:
        allowed = ", ".join(sorted(METHOD_OPTIONS[method])) or "none"
        raise ValueError(f"method={method!r} does not take option {unknown[0]!r} (allowed: {allowed})")


def _synthetic_rates(options, max_k: int) -> list[float]:
    rates, length = options.get("acceptance_rates"), options.get("acceptance_length")
    if (rates is None) == (length is None):
        raise ValueError("method='synthetic' needs exactly one of acceptance_rates, acceptance_length")
    if length is not None:
        return acceptance_length_to_rates(length, max_k)
    rates = check_rates(rates)
    if len(rates) < max_k:
        raise ValueError(f"acceptance_rates has {len(rates)} entries but a request has {max_k} drafts")
    return rates[:max_k]


def _fly_gates(options, probs: torch.Tensor, counts: list[int], device) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position: is the target's top-k entropy above the threshold; per request: the window."""
    threshold = options.get("entropy_threshold", 0.3)
    top = options.get("entropy_top_k", 3)
    window = options.get("window")
    if not (isinstance(threshold, (int, float)) and math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"entropy_threshold={threshold!r} must be a finite number >= 0")
    if not (isinstance(top, int) and top >= 1):
        raise ValueError(f"entropy_top_k={top!r} must be an int >= 1")
    if window is not None and not (isinstance(window, int) and window >= 1):
        raise ValueError(f"window={window!r} must be an int >= 1 (or None for min(6, K - 1))")
    p = probs.topk(min(top, probs.shape[1]), dim=-1).values
    entropy = -torch.where(p > 0, p * p.clamp_min(1e-38).log(), torch.zeros_like(p)).sum(-1)
    windows = [window if window is not None else min(6, k - 1) for k in counts]
    return entropy >= threshold, torch.tensor(windows, dtype=torch.int32, device=device)


def _counts(num_draft_tokens) -> list[int]:
    if isinstance(num_draft_tokens, torch.Tensor):
        if num_draft_tokens.dim() != 1 or num_draft_tokens.is_floating_point():
            raise ValueError(f"num_draft_tokens must be a 1-D integer sequence, got {_describe(num_draft_tokens)}")
        counts = num_draft_tokens.tolist()
    else:
        try:
            counts = list(num_draft_tokens)
        except TypeError:
            raise ValueError(f"num_draft_tokens must be a sequence of ints, got {type(num_draft_tokens).__name__}") from None
    for i, c in enumerate(counts):
        if not isinstance(c, int) or isinstance(c, bool) or c < 0:
            raise ValueError(f"num_draft_tokens[{i}]={c!r} must be an int >= 0")
    return counts


def _vector(name: str, value, length: int, device, *, integer: bool) -> torch.Tensor:
    """``value`` (a tensor or a sequence) as a 1-D tensor of ``length`` on ``device``: integer
    (any integer dtype, never bool or float) or float32; anything else is a one-line error."""
    if not isinstance(value, torch.Tensor):
        try:
            value = torch.tensor(list(value), dtype=torch.long if integer else torch.float32)
        except (TypeError, ValueError):
            kind = "integer" if integer else "float"
            raise ValueError(f"{name} must be a 1-D {kind} tensor of length {length}") from None
    wrong_dtype = integer and (value.is_floating_point() or value.dtype == torch.bool)
    if value.dim() != 1 or value.numel() != length or wrong_dtype:
        what = "integer tensor" if integer else "tensor"
        raise ValueError(f"{name} must be a 1-D {what} of length {length}, got {_describe(value)}")
    return value.to(device) if integer else value.to(device=device, dtype=torch.float32)


def _int_vector(name: str, value, length: int, device) -> torch.Tensor:
    return _vector(name, value, length, device, integer=True)


def _float_vector(name: str, value, length: int, device) -> torch.Tensor:
    return _vector(name, value, length, device, integer=False)


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__
