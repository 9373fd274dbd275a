"""``specpath_engine.bridges.vllm.Proposer`` driven the way vLLM's runner drives it (a stand-in
``VllmConfig`` and the runner's numpy buffers), without vLLM installed: config from the
environment, K agreement, one-line start-up errors, row identity, and drafts equal to the
speculator's own."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from specpath_engine.bridges.common import ENV_VAR, TokenDrafter, _accepted
from specpath.errors import SpeculativeConfigError


def vllm_config(model: str, k: int = 3, max_len: int = 128, seqs: int = 4):
    return SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=k, method="custom_class"),
        model_config=SimpleNamespace(model=model, dtype="float32", max_model_len=max_len),
        scheduler_config=SimpleNamespace(max_num_seqs=seqs),
        device_config=SimpleNamespace(device="cpu"),
    )


@pytest.fixture
def target():
    from specpath_engine.model import default_model_path

    return str(default_model_path())


def make(monkeypatch, target, config: str, **kw):
    from specpath_engine.bridges.vllm import Proposer

    monkeypatch.setenv(ENV_VAR, config)
    return Proposer(vllm_config(target, **kw))


def buffers(histories, width=128):
    tokens = np.zeros((8, width), dtype=np.int32)
    for row, h in enumerate(histories):
        tokens[row, : len(h)] = h
    return tokens, np.array([len(h) for h in histories] + [0] * (8 - len(histories)), dtype=np.int32)


def test_drafts_are_prompt_lookup(monkeypatch, target):
    p = make(monkeypatch, target, '{"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 3}')
    p.load_model(object())
    histories = [[5, 6, 7, 8, 9, 5, 6], [1, 2, 3, 4], [10, 11, 12, 10, 11]]
    tokens, lengths = buffers(histories)
    out = p.propose([[6], [], [11]], lengths, tokens)
    assert out == [[7, 8, 9], [], [12, 10, 11]]
    # next step: row 0 accepted two drafts and sampled a bonus; row 2 was replaced by a new request
    histories = [[5, 6, 7, 8, 9, 5, 6, 7, 8, 9], [1, 2, 3, 4], [40, 41, 40, 41]]
    tokens, lengths = buffers(histories)
    out = p.propose([[7, 8, 9], [], [41]], lengths, tokens)
    assert out == [[5, 6, 7], [], [40, 41]]
    assert len({p.rows._ids[0], p.rows._ids[2]}) == 2


def test_rows_past_the_batch_are_forgotten(monkeypatch, target):
    p = make(monkeypatch, target, '{"method": "freqgram"}')
    tokens, lengths = buffers([[1, 2, 1, 2], [3, 4, 3, 4]])
    p.propose([[2], [4]], lengths, tokens)
    live = set(p.drafter.speculator._models)
    assert len(live) == 2
    tokens, lengths = buffers([[1, 2, 1, 2, 1]])
    p.propose([[1]], lengths, tokens)
    assert set(p.drafter.speculator._models) < live


def test_yaml_file_config(monkeypatch, target, tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("method: ngram\nprompt_lookup_max: 2\nnum_speculative_tokens: 3\n")
    p = make(monkeypatch, target, f"@{path}")
    assert p.spec.prompt_lookup_max == 2 and p.k == 3


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ('{"method": "ngram", "num_speculative_tokens": 5}', "disagrees with vLLM's num_speculative_tokens"),
        ('{"method": "eagle"}', "reads the target's hidden states"),
        ('{"method": "ngrma"}', "did you mean 'ngram'"),
        ('{"method": "ngram", "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2}', "verifies drafts itself"),
        ("{not json", "invalid JSON"),
        ("", "is not set"),
    ],
)
@pytest.mark.filterwarnings("ignore::specpath.config.rules.LossyVerificationWarning")  # the synthetic case warns first
def test_start_up_errors_are_one_line(monkeypatch, target, config, match):
    with pytest.raises(SpeculativeConfigError, match=match) as err:
        make(monkeypatch, target, config)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("config", ["{not json", '["ngram"]', "@spec.txt", "@/nonexistent/spec.json"])
def test_errors_about_the_environment_config_name_the_variable(monkeypatch, target, config):
    """The Proposer's config comes from SPECPATH_SPECULATIVE_CONFIG, so that is what its errors name."""
    with pytest.raises(SpeculativeConfigError) as err:
        make(monkeypatch, target, config)
    assert "--speculative-config" not in str(err.value)
    assert str(err.value).startswith(ENV_VAR) or "/nonexistent/spec.json" in str(err.value)


@pytest.mark.parametrize("missing", ["speculative_config", "model_config", "scheduler_config"])
def test_a_vllm_config_without_a_section_is_one_line_saying_what_vllm_needs(monkeypatch, target, missing):
    from specpath_engine.bridges.vllm import Proposer

    monkeypatch.setenv(ENV_VAR, '{"method": "ngram"}')
    config = vllm_config(target)
    delattr(config, missing)
    with pytest.raises(SpeculativeConfigError) as err:
        Proposer(config)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"vllm_config.{missing}: the specpath vLLM Proposer needs")
    assert "'method': 'custom_class'" in text and "specpath_engine.bridges.vllm.Proposer" in text
    config = vllm_config(target)
    config.speculative_config = SimpleNamespace(method="custom_class")  # no K
    with pytest.raises(SpeculativeConfigError, match=r"\(no num_speculative_tokens\)"):
        Proposer(config)


def test_token_drafter_reports_acceptance(target):
    """on_verified gets the common prefix of what the engine appended and what was drafted."""
    import specpath
    from specpath_engine.bridges.common import token_context
    from specpath.config.model import ModelConfig

    spec = specpath.create_speculative_config({"method": "ngram", "num_speculative_tokens": 3},
                                              target_model_config=ModelConfig(model=target))
    drafter = TokenDrafter(spec, token_context(spec, device="cpu", dtype=None, max_model_len=64, max_num_seqs=1))
    seen = []
    drafter.speculator.on_verified = lambda ids, counts: seen.append((list(ids), list(counts)))
    drafter._pending["r"] = (4, [7, 8, 9])
    drafter.propose([("r", [1, 2, 3, 6, 7, 8, 5], 3)])
    assert seen == [(["r"], [2])]


@pytest.mark.parametrize(
    ("new", "drafts", "accepted"),
    [([5], [5, 6], 0), ([5, 6, 7], [5, 6], 2), ([5, 1, 2], [5, 6, 7], 1), ([9, 1], [5], 0), ([5, 6, 7, 8], [5, 6, 7], 3)],
)
def test_accepted_counts(new, drafts, accepted):
    assert _accepted(new, drafts) == accepted
