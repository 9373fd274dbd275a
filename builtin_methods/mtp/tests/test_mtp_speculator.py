"""The speculators' incremental drafts equal a from-scratch recomputation, step after step:
through prefill chunks, partial acceptance (stale module KV re-filled), mixed budgets in one
batch (including budgets below the module count), and cycling past the module count."""

import pytest
import torch

from specpath_drafting.testing import context_for
from specpath_mtp.module import load_mtp_modules
from specpath_mtp.testing import drive, reference_drafts


def _speculator(target, path, k, max_num_seqs=4):
    from specpath.factory import create_speculator
    from specpath_drafting.testing import resolve

    spec = resolve({"method": "mtp", "model": str(path), "num_speculative_tokens": k})
    return spec, create_speculator(spec, context_for(target, max_num_seqs=max_num_seqs))


@pytest.mark.parametrize(("n", "k", "budgets"), [
    (1, 3, [3, 1, 0]),
    (2, 4, [4, 2, 1]),
    (3, 3, [3, 2, 0]),
    (3, 6, [6, 4, 1]),
])
def test_drafts_match_a_from_scratch_recomputation(tiny, n, k, budgets):
    target, paths = tiny
    spec, speculator = _speculator(target, paths[n], k)
    assert speculator.hidden_state_layers == (target.config.num_hidden_layers - 1,)
    modules = load_mtp_modules(paths[n], embed_tokens=target.embed, lm_head=target.lm_head_logits)
    modules = [m.to(torch.float64).eval() for m in modules]
    prompts = [[(7 * i + 3 * j) % 64 for j in range(10 + 5 * i)] for i in range(3)]

    def check(i, token_ids, drafts):
        assert drafts == reference_drafts(modules, target, token_ids, k)[:len(drafts)], (i, len(token_ids))

    checked = drive(speculator, target, prompts, budgets, steps=6, chunk=4, vocab_size=64, seed=n + k, check=check)
    assert checked == 6 * sum(1 for b in budgets if b)


def test_a_freed_row_starts_clean(tiny):
    """A new request on a reused row must not read the previous request's module KV."""
    target, paths = tiny
    _, speculator = _speculator(target, paths[3], 3, max_num_seqs=1)
    modules = [m.to(torch.float64) for m in load_mtp_modules(paths[3], embed_tokens=target.embed,
                                                              lm_head=target.lm_head_logits)]
    seen = []

    def check(i, token_ids, drafts):
        seen.append(drafts)
        assert drafts == reference_drafts(modules, target, token_ids, 3)

    drive(speculator, target, [[5, 9, 13, 2, 7, 1]], [3], steps=3, chunk=3, vocab_size=64, seed=1, check=check)
    speculator.remove_request("r0")
    drive(speculator, target, [[1, 2, 3, 4]], [3], steps=3, chunk=8, vocab_size=64, seed=2, check=check)
    assert len(seen) == 6


def test_the_module_count_must_match_the_speculator(tiny):
    from specpath_mtp.speculator import MTPSpeculator
    from specpath_drafting.testing import resolve

    target, paths = tiny
    spec = resolve({"method": "mtp", "model": str(paths[3]), "num_speculative_tokens": 3})
    with pytest.raises(ValueError, match="3 MTP modules"):
        MTPSpeculator(spec, context_for(target))


@pytest.mark.parametrize("n", [1, 3])
def test_random_drafts_come_with_the_distributions_they_were_sampled_from(tiny, n):
    from specpath.factory import create_speculator
    from specpath.speculator import DraftBatch, DraftRequest
    from specpath_drafting.testing import resolve

    target, paths = tiny
    spec = resolve({"method": "mtp", "model": str(paths[n]), "num_speculative_tokens": 3,
                    "draft_sample_method": "random"})
    speculator = create_speculator(spec, context_for(target))
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    hidden = target.forward(torch.tensor(ids[:-1]), torch.arange(len(ids) - 1),
                            hidden_layers=speculator.hidden_state_layers).hidden_states
    requests = (DraftRequest(req_id="hot", token_ids=ids, num_new_positions=7, max_draft_tokens=3, temperature=1.0,
                             generator=torch.Generator().manual_seed(0)),
                DraftRequest(req_id="cold", token_ids=ids, num_new_positions=7, max_draft_tokens=2))
    proposal = speculator.propose(DraftBatch(requests=requests, hidden_states=torch.cat([hidden, hidden])))
    assert list(proposal.num_draft_tokens) == [3, 2]
    probs = proposal.draft_probs
    assert probs.shape == (5, 64)
    torch.testing.assert_close(probs.sum(-1).double(), torch.ones(5, dtype=torch.float64))
    chosen = probs[torch.arange(5), proposal.token_ids.long()]
    assert bool((chosen > 0).all())
    assert bool(((probs[3:] == 0) | (probs[3:] == 1)).all()), "greedy rows are one-hot"

    # A depth where only greedy requests draft still gets one-hot rows (not zeros).
    requests = (DraftRequest(req_id="hot", token_ids=ids + [7], num_new_positions=1, max_draft_tokens=1,
                             temperature=1.0, generator=torch.Generator().manual_seed(0)),
                DraftRequest(req_id="cold", token_ids=ids + [7], num_new_positions=1, max_draft_tokens=3))
    hidden = target.forward(torch.tensor(ids), torch.arange(len(ids)),
                            hidden_layers=speculator.hidden_state_layers).hidden_states[-1:]
    proposal = speculator.propose(DraftBatch(requests=requests, hidden_states=torch.cat([hidden, hidden])))
    probs = proposal.draft_probs
    torch.testing.assert_close(probs.sum(-1).double(), torch.ones(4, dtype=torch.float64))
    assert bool((probs[torch.arange(4), proposal.token_ids.long()] > 0).all())


def test_a_recorded_training_vocabulary_restricts_the_drafts(tiny, tmp_path):
    """Modules trained with ``--train-vocab`` draft their recorded ids only: the speculator's
    drafts equal the from-scratch chain through the full head with the other ids masked."""
    from specpath_drafting.testing import masked_head, with_train_vocab

    target, paths = tiny
    keep = list(range(2, 64, 5))
    path = with_train_vocab(paths[1], tmp_path / "restricted", keep)
    _, speculator = _speculator(target, path, 3)
    modules = load_mtp_modules(path, embed_tokens=target.embed, lm_head=masked_head(target.lm_head_logits, keep))
    modules = [m.to(torch.float64).eval() for m in modules]
    prompts = [[(7 * i + 3 * j) % 64 for j in range(10 + 5 * i)] for i in range(3)]
    seen = []

    def check(i, token_ids, drafts):
        assert drafts == reference_drafts(modules, target, token_ids, 3)[:len(drafts)], (i, len(token_ids))
        seen.extend(drafts)

    checked = drive(speculator, target, prompts, [3, 2, 1], steps=5, chunk=4, vocab_size=64, seed=7, check=check)
    assert checked == 15 and set(seen) <= set(keep)


@pytest.mark.parametrize("n", [1, 2])
def test_bf16_drafting_with_the_packed_modules_matches_the_unpacked_ones(tiny, n, monkeypatch):
    from specpath_drafting.testing import DraftingSetup, packed_drafting_matches_unpacked

    _, paths = tiny
    setup = DraftingSetup(paths["target"].parent, None, None, [])
    packed_drafting_matches_unpacked(setup, {"method": "mtp", "model": str(paths[n]), "num_speculative_tokens": 4,
                                             "draft_length_policy": "fixed"}, monkeypatch)  # drafts every step


@pytest.mark.parametrize("n", [1, 2])
def test_quantized_modules_keep_the_output(tiny, n):
    from specpath_drafting.testing import DraftingSetup, quantized_drafting_keeps_the_output

    _, paths = tiny
    setup = DraftingSetup(paths["target"].parent, None, None, [])
    quantized_drafting_keeps_the_output(setup, {"method": "mtp", "model": str(paths[n]), "num_speculative_tokens": 4})
