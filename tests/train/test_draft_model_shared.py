"""A draft that borrows its target's embedding (``shares_target_embeddings``): written without
it by ``train_shared``, lent the target's at load, lossless through the engine."""

import json

import pytest
import torch
from safetensors.torch import load_file

from specpath_engine.llm import LLM
from specpath_engine.model import LlamaModel, default_model_path
from specpath_engine.request import SamplingParams
from specpath_drafting.testing import train_steps
from specpath_train.recipes.draft_model_shared import SHARES_TARGET_EMBEDDINGS, distill_loss, draft_from_target, save_shared_draft

PROMPTS = [list(b"def main():\n    "), list(b"import os\nimport sys\n"), list(b"x = [i for i in ")]
SMOLLM2_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 49152, "hidden_size": 576,
                  "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
                  "head_dim": 64, "max_position_embeddings": 8192, "tie_word_embeddings": True, "eos_token_id": 2}
"""SmolLM2-135M-Instruct's shape: the fingerprint its shipped drafters are found by."""


def test_shared_draft_checkpoint_omits_the_embedding_and_drafts_losslessly(tmp_path):
    target = LlamaModel.from_pretrained(default_model_path())
    draft = draft_from_target(target, [0, 5])
    assert draft.config.num_hidden_layers == 2
    assert torch.equal(draft.model.layers[1].mlp.up_proj.weight, target.model.layers[5].mlp.up_proj.weight)
    save_shared_draft(draft, tmp_path / "d", extra={"note": 1}, dtype=torch.float32)
    config = json.loads((tmp_path / "d" / "config.json").read_text())
    assert config[SHARES_TARGET_EMBEDDINGS] is True and config["num_hidden_layers"] == 2
    assert not any("embed_tokens" in k or "lm_head" in k for k in load_file(str(tmp_path / "d" / "model.safetensors")))

    greedy = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True)
    plain = [o.token_ids for o in LLM(None, num_threads=1).generate(PROMPTS, greedy)]
    # K fixed: the checkpoint is tested, not whether the governor finds a drafter this dear worth it
    llm = LLM(None, {"method": "draft_model", "model": str(tmp_path / "d"), "num_speculative_tokens": 3,
                     "draft_length_policy": "fixed"}, num_threads=1)
    outs = llm.generate(PROMPTS, greedy)
    assert [o.token_ids for o in outs] == plain
    # two of the target's own layers and its head draft better than chance
    assert sum(o.metrics.num_accepted_tokens for o in outs) > 0


def distillation_batch():
    """The embedded target, a 2-layer draft of it, a token batch (no 0xFF: PARD's mask byte),
    the target's last-layer states over it and the head rows a loss scores."""
    target = LlamaModel.from_pretrained(default_model_path())
    tokens = torch.randint(0, 255, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        final = target.forward(tokens, torch.arange(32), hidden_layers=(5,)).hidden_states
    return target, draft_from_target(target, [0, 1]), tokens, final, target.lm_head.weight.detach()[:200]


def test_distillation_loss_trains_the_layers_not_the_borrowed_embedding():
    target, draft, tokens, final, rows = distillation_batch()
    loss_fn = distill_loss(draft, target.model.norm.weight.detach(), rows, 1e-5, reg_weight=0.1)
    params = [p for p in draft.parameters() if p.requires_grad]
    assert all(p is not draft.model.embed_tokens.weight for p in params)
    before, after, info = train_steps(loss_fn, draft, tokens, final, steps=8, lr=1e-3)
    assert after < before and {"ce", "reg", "acc"} <= set(info)


def test_the_smollm2_draft_is_the_default_for_smollm2(tmp_path):
    from specpath.config.model import ModelConfig
    from specpath.config.speculative import SpeculativeConfig
    from specpath_draft_model import CHECKPOINTS

    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2_CONFIG))
    spec = SpeculativeConfig.from_dict({"method": "draft_model", "num_speculative_tokens": 4},
                                       target_model_config=ModelConfig(model=str(tmp_path)))
    assert spec.model == str(CHECKPOINTS / "smollm2-shared")
    assert spec.draft_model_config.hf_config[SHARES_TARGET_EMBEDDINGS] is True
    # the same draft serves PARD: it declares the mask token it was trained with
    pard = SpeculativeConfig.from_dict({"method": "draft_model", "num_speculative_tokens": 4, "parallel_drafting": True},
                                       target_model_config=ModelConfig(model=str(tmp_path)))
    assert pard.model == spec.model and pard.speculator_config.pard_token_id == 16


def test_the_demo_runs_pard_on_smollm2_and_the_autoregressive_draft_on_the_embedded_model(tmp_path):
    from specpath.config.model import ModelConfig
    from specpath_engine.cli_run import demo_configs
    from specpath_draft_model.config import StandaloneARSpeculatorConfig

    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2_CONFIG))
    runs, skipped = demo_configs(4, {"draft_model"}, target=ModelConfig(model=str(tmp_path)))
    assert runs == [("draft_model", {"num_speculative_tokens": 4, "parallel_drafting": True, "method": "draft_model"})]
    from specpath.demo import demo_for

    embedded = demo_for("draft_model", StandaloneARSpeculatorConfig).config
    assert "parallel_drafting" not in embedded and embedded["num_speculative_tokens"] == 6


def test_a_draft_with_a_recorded_training_vocabulary_drafts_only_those_ids(tmp_path):
    """``train_shared --train-vocab`` records the ids its head was scored on; the speculator then
    drafts over them only (each draft the best kept id of the full head), and stays lossless."""
    from specpath_drafting.testing import with_train_vocab
    from specpath_drafting.vocab import RestrictedLMHead

    target = LlamaModel.from_pretrained(default_model_path())
    save_shared_draft(draft_from_target(target, [0, 5]), tmp_path / "d", extra={}, dtype=torch.float32)
    keep = list(range(32, 127))  # printable ASCII
    path = with_train_vocab(tmp_path / "d", tmp_path / "restricted", keep)
    greedy = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True)
    plain = [o.token_ids for o in LLM(None, num_threads=1).generate(PROMPTS, greedy)]
    llm = LLM(None, {"method": "draft_model", "model": str(path), "num_speculative_tokens": 3,
                     "draft_length_policy": "fixed"}, num_threads=1)  # drafts every step, whatever they cost
    speculator = llm.engine.runner.speculator
    assert isinstance(speculator.model.lm_head, RestrictedLMHead)
    drafted = []
    choose = speculator._choose

    def recording(logits, *args):
        tokens, probs = choose(logits, *args)
        drafted.extend(tokens.tolist())
        return tokens, probs

    speculator._choose = recording
    outs = llm.generate(PROMPTS, greedy)
    assert [o.token_ids for o in outs] == plain
    assert drafted and set(drafted) <= set(keep)


@pytest.mark.parametrize("parallel", [False, True])
def test_drafting_over_the_kept_ids_drafts_what_the_whole_vocabulary_drafts(tmp_path, parallel):
    """A restricted head hands the speculator its kept ids' logits alone (``compact``): greedy and
    seeded sampled requests get the drafts the whole vocabulary's logits give them, proposal by
    proposal, autoregressive and PARD."""
    from specpath_drafting.testing import with_train_vocab

    target = LlamaModel.from_pretrained(default_model_path())
    save_shared_draft(draft_from_target(target, [0, 5]), tmp_path / "d", extra={"pard_token_id": 0},
                      dtype=torch.float32)
    path = with_train_vocab(tmp_path / "d", tmp_path / "restricted", list(range(32, 127)))
    params = [SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True),
              SamplingParams(temperature=0.8, seed=4, max_tokens=24, ignore_eos=True)]
    runs = []
    for whole in (False, True):
        llm = LLM(None, {"method": "draft_model", "model": str(path), "num_speculative_tokens": 3,
                         "parallel_drafting": parallel, "draft_length_policy": "fixed"}, num_threads=1)
        speculator = llm.engine.runner.speculator
        assert speculator.vocab_ids is not None and speculator.model.lm_head.compact
        if whole:
            speculator.model.lm_head.compact, speculator.vocab_ids = False, None
        proposals, propose = [], speculator.propose

        def recording(batch, propose=propose, proposals=proposals):
            out = propose(batch)
            proposals.append(out.token_ids.tolist())
            return out

        speculator.propose = recording
        llm.generate(PROMPTS[:2], params)
        runs.append(proposals)
    assert len(runs[0]) > 5 and runs[0] == runs[1]


def test_pard_copy_zero_is_the_causal_draft():
    """Under PARD's layout the real copy sees exactly its causal prefix, so its outputs are the
    plain draft's; the mask copies see their own masks and differ."""
    from specpath_train.recipes.draft_model import pard_layout
    from specpath_train.recipes.draft_model_shared import hidden_states

    target = LlamaModel.from_pretrained(default_model_path())
    draft = draft_from_target(target, [0, 1])
    tokens = torch.randint(0, 255, (2, 24), generator=torch.Generator().manual_seed(1))
    positions, mask, _ = pard_layout(24, 3)
    ids = tokens.repeat(1, 4)
    ids[:, 24:] = 255
    with torch.no_grad():
        pard = hidden_states(draft, ids, positions, mask)
        causal = hidden_states(draft, tokens)
    torch.testing.assert_close(pard[:, :24], causal, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(pard[:, 24:48], causal, atol=1e-3)


def test_pard_distillation_trains_every_depth_and_records_its_mask_token(tmp_path):
    from specpath_draft_model.config import PARD_TOKEN_KEY
    from specpath_train.recipes.draft_model_shared import load_draft_layers, pard_distill_loss

    target, draft, tokens, final, rows = distillation_batch()
    loss_fn = pard_distill_loss(draft, target.model.norm.weight.detach(), rows, 1e-5, reg_weight=0.1,
                                depth=3, mask_token=255, window=32)
    before, after, info = train_steps(loss_fn, draft, tokens, final, steps=8, lr=1e-3)
    assert after < before and {"ce", "reg", "acc0", "acc1", "acc2", "acc3"} <= set(info)

    save_shared_draft(draft, tmp_path / "pard", extra={PARD_TOKEN_KEY: 255}, dtype=torch.float32)
    again = draft_from_target(target, [2, 3])
    load_draft_layers(again, tmp_path / "pard")
    assert torch.equal(again.model.layers[1].mlp.up_proj.weight, draft.model.layers[1].mlp.up_proj.weight)
    greedy = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True)
    plain = [o.token_ids for o in LLM(None, num_threads=1).generate(PROMPTS, greedy)]
    for parallel in (False, True):  # one checkpoint, both drafting shapes, both lossless
        spec = {"method": "draft_model", "model": str(tmp_path / "pard"), "num_speculative_tokens": 3,
                "parallel_drafting": parallel}
        assert [o.token_ids for o in LLM(None, spec, num_threads=1).generate(PROMPTS, greedy)] == plain


def test_loading_layers_of_another_shape_is_refused(tmp_path):
    import pytest

    from specpath_train.recipes.draft_model_shared import load_draft_layers

    target = LlamaModel.from_pretrained(default_model_path())
    save_shared_draft(draft_from_target(target, [0]), tmp_path / "one", extra={}, dtype=torch.float32)
    with pytest.raises(ValueError, match="not a draft of 2 layers"):
        load_draft_layers(draft_from_target(target, [0, 1]), tmp_path / "one")
