"""The speculators format: as a draft (K from its proposal) and as the served model (the
verifier becomes the target, method and K from ``speculators_config``), local or as a hub id
from the local cache; and the v1 runner's dynamic-K whitelist."""

from __future__ import annotations

import contextlib
import json
import shutil
import warnings

import pytest

from specpath.config.engine import EngineConfig, EngineConfigWarning
from specpath.config.speculators_format import declared_num_speculative_tokens, maybe_override_with_speculators
from specpath_engine.llm import LLM
from specpath_engine.request import SamplingParams
from specpath.errors import SpeculativeConfigError

PROMPTS = [[1, 2, 3, 4, 5, 6, 7, 8] * 3, [5, 9, 3, 1] * 5]
GREEDY = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def speculators_section(verifier, k, algorithm="eagle3", default=None):
    proposals = [{"proposal_type": "greedy", "speculative_tokens": k, "verifier_accept_k": 1, "accept_tolerance": 0.0}]
    if default is not None:
        proposals.insert(0, {"proposal_type": "sampling", "speculative_tokens": k + 3})
    section = {"algorithm": algorithm, "proposal_methods": proposals,
               "verifier": {"architectures": ["LlamaForCausalLM"], "name_or_path": str(verifier)}}
    if default is not None:
        section["default_proposal_method"] = default
    return section


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("specpath_eagle3")
    from specpath_drafting.testing import random_head, drafting_target
    from specpath_eagle3.head import Eagle3Head

    root = tmp_path_factory.mktemp("speculators")
    target = drafting_target(root / "target", num_layers=4)
    head = random_head(Eagle3Head, target, root / "head", seed=3)
    speculator = root / "Tiny-speculator.eagle3"
    shutil.copytree(head, speculator)
    config = json.loads((speculator / "config.json").read_text())
    # a speculators-format head of specpath's architecture says so (the format's default is a pre-residual norm)
    config.update(speculators_model_type="eagle3", speculators_config=speculators_section(root / "target", 3),
                  norm_before_residual=False)
    (speculator / "config.json").write_text(json.dumps(config))
    plain = LLM(str(root / "target"), num_threads=1, max_num_batched_tokens=40, max_num_seqs=4)
    return root, speculator, [o.token_ids for o in plain.generate(PROMPTS, GREEDY)]


def test_the_default_proposal_gives_k():
    assert declared_num_speculative_tokens({"speculators_config": speculators_section("t", 5)}) == 5
    assert declared_num_speculative_tokens({"speculators_config": speculators_section("t", 5, default="greedy")}) == 5
    assert declared_num_speculative_tokens({"speculators_config": {"proposal_methods": []}}) is None
    assert declared_num_speculative_tokens({}) is None


def test_a_plain_model_is_left_alone(files):
    root, _, _ = files
    assert maybe_override_with_speculators(str(root / "target"), {"method": "ngram"}) == (
        str(root / "target"), {"method": "ngram"})


def test_as_the_served_model_the_verifier_is_the_target(files):
    root, speculator, _ = files
    engine = EngineConfig.create(str(speculator))
    spec = engine.speculative_config
    assert engine.model_config.model == str(root / "target")
    assert (spec.method, spec.model, spec.num_speculative_tokens) == ("eagle3", str(speculator), 3)
    given = EngineConfig.create(str(speculator), {"num_speculative_tokens": 2}).speculative_config
    assert given.num_speculative_tokens == 2  # the user's fields win


def test_as_the_served_model_it_drafts_losslessly(files):
    _, speculator, plain = files
    llm = LLM(str(speculator), num_threads=1, max_num_batched_tokens=40, max_num_seqs=4)
    assert llm.engine_config.speculative_config.method == "eagle3"
    assert [o.token_ids for o in llm.generate(PROMPTS, GREEDY)] == plain


def test_as_a_draft_k_comes_from_the_proposal(files):
    root, speculator, _ = files
    spec = EngineConfig.create(str(root / "target"), {"model": str(speculator)}).speculative_config
    assert (spec.method, spec.num_speculative_tokens) == ("eagle3", 3)


def test_a_verifier_named_by_hub_id_is_read_from_the_cache(files, tmp_path, monkeypatch):
    root, speculator, _ = files
    cache = tmp_path / "hub"
    snap = cache / "models--org--tiny-target" / "snapshots" / COMMIT
    shutil.copytree(root / "target", snap)
    (cache / "models--org--tiny-target" / "refs").mkdir()
    (cache / "models--org--tiny-target" / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)
    hub_speculator = tmp_path / "spec"
    shutil.copytree(speculator, hub_speculator)
    config = json.loads((hub_speculator / "config.json").read_text())
    config["speculators_config"] = speculators_section("org/tiny-target", 2)
    (hub_speculator / "config.json").write_text(json.dumps(config))
    engine = EngineConfig.create(str(hub_speculator))
    assert engine.model_config.model == str(snap) and engine.model_config.model_weights == "org/tiny-target"
    assert engine.speculative_config.num_speculative_tokens == 2
    config["speculators_config"] = speculators_section("org/absent", 2)
    (hub_speculator / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpeculativeConfigError, match="models--org--absent"):
        EngineConfig.create(str(hub_speculator))


def test_a_speculators_checkpoint_without_a_verifier_is_one_line(files, tmp_path):
    _, speculator, _ = files
    broken = tmp_path / "broken"
    shutil.copytree(speculator, broken)
    config = json.loads((broken / "config.json").read_text())
    del config["speculators_config"]["verifier"]
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpeculativeConfigError, match="verifier.name_or_path") as info:
        EngineConfig.create(str(broken))
    assert "\n" not in str(info.value)


def test_peagle_algorithm_is_eagle3_with_parallel_drafting(tmp_path):
    spec_dir = tmp_path / "p"
    spec_dir.mkdir()
    (spec_dir / "config.json").write_text(json.dumps(
        {"speculators_model_type": "peagle", "speculators_config": speculators_section("org/t", 4, algorithm="peagle")}))
    target, spec = maybe_override_with_speculators(str(spec_dir), None)
    assert target == "org/t"
    assert spec == {"model": str(spec_dir), "method": "eagle3", "parallel_drafting": True, "num_speculative_tokens": 4}


TABLE = [(1, 4, 4), (5, 16, 2)]


@pytest.mark.parametrize("method, kept", [("ngram", True), ("ngram_gpu", False)])
def test_v1_keeps_dynamic_k_only_for_the_articles_whitelist(files, method, kept):
    root, _, _ = files
    data = {"method": method, "num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": TABLE}
    with pytest.warns(EngineConfigWarning) if not kept else _no_warning():
        v1 = EngineConfig.create(str(root / "target"), data, runner="v1")
    assert (v1.dynamic_k_table is not None) == kept
    assert EngineConfig.create(str(root / "target"), data, runner="v2").dynamic_k_table is not None


@contextlib.contextmanager
def _no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", EngineConfigWarning)
        yield
