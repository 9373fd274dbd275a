"""Sampled drafts keep the target's distribution: the first token emitted after verification is
distributed as the target's next-token distribution (Pearson chi-square, fixed seeds).

The speculator drafts for many requests that share one prompt; each request's drafts are
verified with ``specpath_engine.sample.rejection_sample`` against the tiny target's logits, exactly as
the engine does. A draft unrelated to the target makes rejections (and the residual resampling)
common, so the test has teeth.
"""

import pytest
import torch

import tiny_drafts
from specpath.config.speculative import SpeculativeConfig
from specpath_engine.model import LlamaModel
from specpath.factory import create_speculator
from specpath_engine.sample import rejection_sample
from specpath.speculator import DraftBatch, DraftRequest
from specpath_engine.testing.engine import target_context

PROMPT = tuple(b"def f(x):\n    return")
BATCH, ROUNDS, K = 250, 16, 3
TOP = 8  # chi-square cells: the target's TOP likeliest tokens and "the rest"


def chi_square_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Upper tail of Pearson's statistic with len(cells) - 1 degrees of freedom."""
    counts, probs = counts.double(), probs.double()
    expected = probs * counts.sum()
    stat = ((counts - expected) ** 2 / expected).sum()
    df = torch.tensor((len(counts) - 1) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(df, stat / 2))


def cells(tokens: torch.Tensor, order: torch.Tensor, vocab: int) -> torch.Tensor:
    counts = torch.bincount(tokens.long(), minlength=vocab)[order]
    return torch.cat([counts[:TOP], counts[TOP:].sum()[None]])


def first_tokens(options: dict, temperature: float = 1.0, target_path: str | None = None):
    """(first emitted tokens, target next-token probabilities, first-draft acceptance rate)."""
    torch.manual_seed(0)
    target_path = target_path or tiny_drafts.path("sharp")
    target = LlamaModel.from_pretrained(target_path)
    spec = SpeculativeConfig.from_dict({"method": "draft_model", "num_speculative_tokens": K, **options})
    speculator = create_speculator(spec, target_context(target_path, max_num_seqs=BATCH))
    n = len(PROMPT)
    emitted, accepted = [], 0
    for r in range(ROUNDS):
        generators = [torch.Generator().manual_seed(1000 * r + i) for i in range(BATCH)]
        requests = tuple(
            DraftRequest(req_id=f"{r}-{i}", token_ids=PROMPT, num_new_positions=n - 1, max_draft_tokens=K,
                         temperature=temperature, generator=g)
            for i, g in enumerate(generators)
        )
        proposal = speculator.propose(DraftBatch(requests=requests))
        assert list(proposal.num_draft_tokens) == [K] * BATCH
        drafts = proposal.token_ids.view(BATCH, K).long()
        with torch.no_grad():
            ids = torch.cat([torch.tensor(PROMPT).expand(BATCH, n), drafts], dim=1)
            logits = target.forward_batch(ids)[:, n - 1 :]
        probs = torch.softmax(logits[:, -1] / temperature, -1)
        bonus = torch.stack([torch.multinomial(p, 1, generator=g)[0] for p, g in zip(probs, generators)])
        out = rejection_sample(
            proposal.token_ids, [K] * BATCH, logits[:, :K].reshape(BATCH * K, -1), bonus,
            [temperature] * BATCH, draft_probs=proposal.draft_probs, generators=generators,
        )
        emitted.append(out[:, 0])
        accepted += int((out[:, 1] >= 0).sum())  # a second emitted token: the first draft was accepted
        for request in requests:
            speculator.remove_request(request.req_id)
    p = torch.softmax(logits[0, 0] / temperature, -1)
    return torch.cat(emitted), p, accepted / (ROUNDS * BATCH)


@pytest.mark.parametrize(
    "shape",
    [
        {"model": "sharp_near", "draft_sample_method": "random"},
        {"model": "sharp_near_pard", "parallel_drafting": True, "draft_sample_method": "random"},
        {"model": "sharp", "draft_sample_method": "random"},
    ],
    ids=["autoregressive", "pard", "self-draft"],
)
def test_first_emitted_token_follows_the_target(shape):
    options = {**shape, "model": tiny_drafts.path(shape["model"])}
    tokens, p, acceptance = first_tokens(options)
    order = torch.argsort(p, descending=True)
    expected = torch.cat([p[order][:TOP], p[order][TOP:].sum()[None]])
    assert chi_square_pvalue(cells(tokens, order, p.numel()), expected) > 1e-3
    if shape["model"] == "sharp":
        assert acceptance == 1.0  # q == p: min(1, p/q) = 1, every sampled draft is accepted
    else:
        assert 0.0 < acceptance < 1.0  # both branches of verification ran (accept, and resample)


def tli_target(tmp_path) -> str:
    """The sharp target, edited so that the BPE draft's greedy first byte after ``PROMPT`` has
    probability about 0.4 under it: TLI drafts are then accepted about that often and the
    residual resampling covers the rest (an untrained draft and target would never agree)."""
    target = LlamaModel.from_pretrained(tiny_drafts.path("sharp"))
    spec = SpeculativeConfig.from_dict({"method": "draft_model", "num_speculative_tokens": 1,
                                        "model": tiny_drafts.path("bpe"), "use_heterogeneous_vocab": True})
    speculator = create_speculator(spec, target_context(tiny_drafts.path("sharp")))
    proposal = speculator.propose(DraftBatch(requests=(
        DraftRequest(req_id="probe", token_ids=PROMPT, num_new_positions=0, max_draft_tokens=1),)))
    draft = int(proposal.token_ids[0])
    with torch.no_grad():
        ids = torch.tensor(PROMPT)
        out = target.forward(ids, torch.arange(len(ids)), hidden_layers=(target.config.num_hidden_layers - 1,))
        h = target.final_norm(out.hidden_states[-1, 0])
        logits = out.logits[-1]
        others = torch.logsumexp(torch.cat([logits[:draft], logits[draft + 1 :]]), 0)
        lift = float(others + torch.log(torch.tensor(0.4 / 0.6)) - logits[draft])
        target.lm_head.weight[draft] += lift * h / h.dot(h)
    target.save_pretrained(tmp_path / "tli_target")
    return str(tmp_path / "tli_target")


def test_tli_first_emitted_token_follows_the_target(tmp_path):
    """Greedy BPE drafts lifted to bytes are verified as one-hot drafts: lossless."""
    options = {"model": tiny_drafts.path("bpe"), "use_heterogeneous_vocab": True}
    tokens, p, acceptance = first_tokens(options, target_path=tli_target(tmp_path))
    order = torch.argsort(p, descending=True)
    expected = torch.cat([p[order][:TOP], p[order][TOP:].sum()[None]])
    assert chi_square_pvalue(cells(tokens, order, p.numel()), expected) > 1e-3
    assert 0.3 < acceptance < 0.5


def test_sampled_drafts_follow_their_reported_probabilities():
    """A random draft's first tokens are distributed as the draft_probs it returned."""
    target_path = tiny_drafts.target()
    spec = SpeculativeConfig.from_dict(
        {"method": "draft_model", "num_speculative_tokens": 2, "model": tiny_drafts.path("random"),
         "draft_sample_method": "random"}
    )
    speculator = create_speculator(spec, target_context(target_path, max_num_seqs=BATCH))
    firsts, q = [], None
    for r in range(ROUNDS):
        requests = tuple(
            DraftRequest(req_id=f"{r}-{i}", token_ids=PROMPT, num_new_positions=0, max_draft_tokens=2,
                         temperature=0.8, generator=torch.Generator().manual_seed(7000 * r + i))
            for i in range(BATCH)
        )
        proposal = speculator.propose(DraftBatch(requests=requests))
        firsts.append(proposal.token_ids.view(BATCH, 2)[:, 0])
        q = proposal.draft_probs.view(BATCH, 2, -1)[0, 0]
        for request in requests:
            speculator.remove_request(request.req_id)
    order = torch.argsort(q, descending=True)
    expected = torch.cat([q[order][:TOP], q[order][TOP:].sum()[None]])
    assert chi_square_pvalue(cells(torch.cat(firsts), order, q.numel()), expected) > 1e-3
