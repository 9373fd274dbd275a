"""SpeculativeConfig: structuring, the three-layer dispatch and every start-up check."""

from __future__ import annotations

import json
import warnings

import attrs
import pytest

from specpath.verification import acceptance_length_to_rates

import core_fakes
from specpath.config.model import ModelConfig, ParallelConfig
from specpath.config.speculative import (
    LossyVerificationWarning,
    SpeculativeConfig,
)
from specpath.errors import SpeculativeConfigError, UnknownMethodError
from specpath.methods import MethodAliasWarning
from specpath.registry import register_speculative_method

pytestmark = pytest.mark.usefixtures("fake_builtins")


def resolve(**kw):
    return SpeculativeConfig.from_dict(kw)


def error(**kw) -> str:
    with pytest.raises(SpeculativeConfigError) as info:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            SpeculativeConfig.from_dict(kw)
    text = str(info.value)
    assert "\n" not in text
    return text


@pytest.fixture
def target(make_checkpoint):
    return ModelConfig(model=make_checkpoint("target", max_position_embeddings=2048))


# -- structuring -----------------------------------------------------------------------------


def test_strict_structuring():
    assert error(method="ngram", num_speculative_tokens="3") == (
        "speculative_config.num_speculative_tokens: expected int (got '3')"
    )
    assert "expected int (got 3.9)" in error(method="ngram", num_speculative_tokens=3.9)
    assert "expected int (got True)" in error(method="ngram", num_speculative_tokens=True)
    assert error(method="ngram", num_speculative_tokens=3, prompt_lookup_mx=2) == (
        "speculative_config: unknown key 'prompt_lookup_mx' (did you mean 'prompt_lookup_max'?)"
    )
    assert "is set during resolution" in error(method="ngram", custom_method="x")
    assert "target_model_config: comes from the target model" in error(method="ngram", target_model_config={})


def test_direct_construction_gets_the_same_type_checks():
    with pytest.raises(SpeculativeConfigError, match="num_speculative_tokens: expected int"):
        SpeculativeConfig(method="ngram", num_speculative_tokens="3")
    with pytest.raises(SpeculativeConfigError, match="is set during resolution"):
        SpeculativeConfig(method="ngram", num_speculative_tokens=3, draft_model_config=object())
    with pytest.raises(SpeculativeConfigError, match="target_model_config: must be a ModelConfig"):
        SpeculativeConfig(method="ngram", num_speculative_tokens=3, target_model_config={})


def test_resolved_config_is_read_only_and_replace_re_resolves():
    spec = resolve(method="[ngram]", num_speculative_tokens=3, synthetic_acceptance_rates=None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        spec.num_speculative_tokens = 4
    bigger = spec.replace(num_speculative_tokens=5)
    assert (bigger.num_speculative_tokens, bigger.method, spec.num_speculative_tokens) == (5, "ngram", 3)
    register_speculative_method("my_ngram", core_fakes.MyNgram)
    custom = resolve(method="my_ngram", num_speculative_tokens=3)
    assert custom.replace(num_speculative_tokens=4).custom_method == "my_ngram"
    with pytest.raises(SpeculativeConfigError, match="replace"):  # derived fields are not input
        attrs.evolve(custom, num_speculative_tokens=4)


def test_lists_become_tuples_and_options_a_read_only_mapping():
    register_speculative_method("my_ngram", core_fakes.MyNgram)
    spec = resolve(method="my_ngram", num_speculative_tokens=3, speculator_options={"a": [1]},
                   num_speculative_tokens_per_batch_size=[[1, 2, 3]])
    assert spec.num_speculative_tokens_per_batch_size == ((1, 2, 3),)
    with pytest.raises(TypeError):
        spec.speculator_options["b"] = 1
    hash(spec.num_speculative_tokens_per_batch_size)


# -- dispatch --------------------------------------------------------------------------------


def test_custom_method_resolves_to_its_base_method(make_checkpoint):
    register_speculative_method("my_eagle3", core_fakes.MyEagle3)
    spec = resolve(method="my_eagle3", model=make_checkpoint("head"), num_speculative_tokens=3)
    assert (spec.method, spec.custom_method) == ("eagle3", "my_eagle3")
    assert type(spec.speculator_config) is core_fakes.MyEagle3
    assert spec.speculator_config.spec is spec


def test_inference_from_model():
    assert "speculative_config.model: must not be empty" in error(model=" ", num_speculative_tokens=2)
    assert resolve(model="[ngram]", num_speculative_tokens=2).method == "ngram"
    assert resolve(model="ngram", num_speculative_tokens=2).method == "ngram"
    assert "speculative_config.model: required for method 'draft_model'" in error(num_speculative_tokens=2)
    for path in ("my_pkg.proposer:MyProposer", "my_pkg.proposer.MyProposer"):  # detected as custom_class
        assert "pip install ./builtin_methods/custom_class" in error(model=path, num_speculative_tokens=2)


def test_method_names_are_validated_with_a_suggestion():
    with pytest.raises(UnknownMethodError) as info:
        resolve(method="eagel3", num_speculative_tokens=2)
    assert info.value.suggestion == "eagle3" and info.value.field == "speculative_config.method"
    assert "pip install ./builtin_methods/suffix" in error(method="suffix", num_speculative_tokens=2)


def test_mtp_alias_warns_and_resolves_to_mtp(make_checkpoint, target):
    with pytest.warns(MethodAliasWarning):
        spec = SpeculativeConfig.from_dict(
            {"method": "deepseek_mtp", "num_speculative_tokens": 1}, target_model_config=target
        )
    assert spec.method == "mtp"
    assert spec.model == target.model  # MTP's default_model is the target's weights
    assert ("alias", "'deepseek_mtp' normalised to 'mtp'") in spec.resolution_trace


def test_configure_updates_are_applied_and_traced():
    spec = resolve(method="ngram", num_speculative_tokens=2, prompt_lookup_max=7)
    assert (spec.prompt_lookup_min, spec.prompt_lookup_max) == (5, 7)
    assert any(step == "configure" for step, _ in spec.resolution_trace)


def test_a_configure_hook_returning_an_unknown_field_is_reported():
    @attrs.frozen(kw_only=True)
    class Bad(core_fakes.FakeNgram):
        @classmethod
        def configure(cls, spec):
            return {"promt_lookup_min": 3}

    register_speculative_method("bad_configure", Bad)
    assert "returned an unknown field (got 'promt_lookup_min'; did you mean 'prompt_lookup_min'?)" in error(
        method="bad_configure", num_speculative_tokens=2
    )


@pytest.mark.parametrize(
    ("dirname", "config", "method"),
    [
        ("my-eagle-head", {}, "eagle"),
        ("my-eagle3-head", {}, "eagle3"),
        ("eagle-and-eagle3", {}, "eagle"),  # the article's order: eagle is asked first
        ("a-dflash-draft", {}, "dflash"),
        ("a-dspark-draft", {}, "dspark"),
        ("some-draft", {"model_type": "deepseek_mtp"}, "mtp"),
        ("plain-draft", {}, "draft_model"),
    ],
)
def test_detection_order_without_a_method(make_checkpoint, dirname, config, method):
    path = make_checkpoint(dirname, **config)
    assert resolve(model=path, num_speculative_tokens=2).method == method


def test_checkpoint_declared_class_by_registered_name(make_checkpoint):
    register_speculative_method("my_eagle3", core_fakes.MyEagle3)
    path = make_checkpoint("declared", speculator_config_class="my_eagle3")
    inferred = resolve(model=path, num_speculative_tokens=2)
    assert (inferred.method, inferred.custom_method, type(inferred.speculator_config)) == (
        "eagle3", "my_eagle3", core_fakes.MyEagle3
    )
    explicit = resolve(method="eagle3", model=path, num_speculative_tokens=2)
    assert type(explicit.speculator_config) is core_fakes.MyEagle3


def test_requested_vs_declared_mismatch(make_checkpoint):
    path = make_checkpoint("an-mtp", speculator_config_class="mtp")
    text = error(method="eagle3", model=path, num_speculative_tokens=2)
    assert "requested method='eagle3', but the draft model" in text and "is a 'mtp' checkpoint" in text


def test_declared_import_path_needs_trust_remote_code(make_checkpoint):
    path = make_checkpoint("by-path", speculator_config_class="core_fakes:MyEagle3")
    assert "only registered method names are allowed unless trust_remote_code=True" in error(
        method="eagle3", model=path, num_speculative_tokens=2
    )
    trusted = ModelConfig(model=make_checkpoint("trusted-target"), trust_remote_code=True)
    spec = SpeculativeConfig.from_dict(
        {"method": "eagle3", "model": path, "num_speculative_tokens": 2}, target_model_config=trusted
    )
    assert type(spec.speculator_config) is core_fakes.MyEagle3


def test_declared_unknown_name_is_reported(make_checkpoint):
    path = make_checkpoint("typo", speculator_config_class="eagel3")
    assert "config.json:speculator_config_class" in error(model=path, num_speculative_tokens=2)


def test_specialize_picks_a_subclass(make_checkpoint, target):
    path = make_checkpoint("mtp3", model_type="deepseek_mtp", num_nextn_predict_layers=3, n_predict=3)
    spec = SpeculativeConfig.from_dict({"method": "mtp", "model": path}, target_model_config=target)
    assert type(spec.speculator_config) is core_fakes.FakeMultiModuleMTP
    assert spec.num_speculative_tokens == 3  # from n_predict
    assert spec.speculator_config.num_prefill_lookahead_tokens == 3


def test_method_specific_options_need_support(make_checkpoint):
    path = make_checkpoint("mtp", model_type="mtp")
    assert error(method="mtp", model=path, num_speculative_tokens=2, dspark_draft_topk=4) == (
        "speculative_config.dspark_draft_topk: is not supported by method 'mtp' (FakeMTP) "
        "(got 4; allowed: draft_tree_topk, index_share_for_mtp_iteration)"
    )
    plain = make_checkpoint("plain")  # an MTP checkpoint is only for mtp (another method is refused)
    assert "index_share_for_mtp_iteration: is not supported by method 'eagle'" in error(
        method="eagle", model=plain, num_speculative_tokens=2, index_share_for_mtp_iteration=True
    )
    assert resolve(method="dspark", model=plain, num_speculative_tokens=2, dspark_draft_topk=4).dspark_draft_topk == 4
    assert "is a 'mtp' checkpoint" in error(method="eagle", model=path, num_speculative_tokens=2)


def test_a_custom_method_may_verify_its_own_options(make_checkpoint):
    register_speculative_method("my_eagle3", core_fakes.MyEagle3)
    path = make_checkpoint("h")
    assert "speculator_options.depth: depth must be an int" in error(
        method="my_eagle3", model=path, num_speculative_tokens=2, speculator_options={"depth": "x"}
    )


# -- _verify_args ----------------------------------------------------------------------------


def test_tensor_parallel_size_placeholder():
    assert "pass draft_tensor_parallel_size instead" in error(method="ngram", num_speculative_tokens=2, tensor_parallel_size=2)


def test_k_must_be_given_and_positive():
    assert "num_speculative_tokens: must be provided for method 'ngram'" in error(method="ngram")
    assert "num_speculative_tokens: must be greater than 0 (got 0)" in error(method="ngram", num_speculative_tokens=0)
    assert "must be greater than 0 (got -1)" in error(method="ngram", num_speculative_tokens=-1)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ([[1, 8, 4], [9, 32, 3], [33, 128, 2]], None),
        ([[1, 1, 1]], None),
        ([], "at least one"),
        ([[0, 4, 2]], "1 <= start <= end"),
        ([[5, 4, 2]], "1 <= start <= end"),
        ([[1, 4, 5]], "K must be in 1..num_speculative_tokens (4)"),
        ([[1, 4, 0]], "K must be in 1..num_speculative_tokens"),
        ([[1, 8, 4], [8, 9, 2]], "ranges overlap: [1, 8, 4] and [8, 9, 2]"),
        ([[9, 12, 2], [1, 10, 4]], "ranges overlap"),
        ([[1, 2]], "exactly 3 items"),
    ],
)
def test_dynamic_k_table(table, message):
    kw = dict(method="ngram", num_speculative_tokens=4, num_speculative_tokens_per_batch_size=table)
    if message is None:
        assert resolve(**kw).num_speculative_tokens_per_batch_size == tuple(map(tuple, table))
    else:
        assert message in error(**kw)


def test_synthetic_rates_and_length():
    with pytest.warns(LossyVerificationWarning):
        spec = resolve(method="ngram", num_speculative_tokens=3, rejection_sample_method="synthetic",
                       synthetic_acceptance_rates=[0.9, 0.5, 0.5])
    assert spec.synthetic_rates == (0.9, 0.5, 0.5) and spec.is_lossy
    with pytest.warns(LossyVerificationWarning):
        spec = resolve(method="ngram", num_speculative_tokens=4, rejection_sample_method="synthetic",
                       synthetic_acceptance_length=2.5)
    assert spec.synthetic_rates == (1.0, 0.5, 0.0, 0.0)
    base = dict(method="ngram", num_speculative_tokens=3, rejection_sample_method="synthetic")
    assert "requires exactly one of" in error(**base)
    assert "requires exactly one of" in error(**base, synthetic_acceptance_rates=[1, 1, 1], synthetic_acceptance_length=2)
    assert "must have num_speculative_tokens (3) entries" in error(**base, synthetic_acceptance_rates=[1, 1])
    assert "in [0, 1]" in error(**base, synthetic_acceptance_rates=[1.2, 1, 1])
    assert "non-increasing" in error(**base, synthetic_acceptance_rates=[0.5, 0.6, 0.1])
    assert "[1, 4]" in error(**base, synthetic_acceptance_length=4.5)
    assert "[1, 4]" in error(**base, synthetic_acceptance_length=0.5)
    assert "only valid with rejection_sample_method='synthetic'" in error(
        method="ngram", num_speculative_tokens=3, synthetic_acceptance_length=2
    )


@pytest.mark.parametrize(
    ("length", "k", "rates"),
    [(1.0, 3, (0.0, 0.0, 0.0)), (2.0, 3, (1.0, 0.0, 0.0)), (2.25, 3, (1.0, 0.25, 0.0)),
     (4.0, 3, (1.0, 1.0, 1.0)), (3.7, 5, (1.0, 1.0, 0.7, 0.0, 0.0))],
)
def test_min_variance_schedule(length, k, rates):
    got = tuple(acceptance_length_to_rates(length, k))
    assert got == pytest.approx(rates) and len(got) == k
    assert sum(got) == pytest.approx(length - 1)




def test_fly_rules(make_checkpoint):
    with pytest.warns(LossyVerificationWarning, match="lossy"):
        assert resolve(method="ngram", num_speculative_tokens=4, rejection_sample_method="fly").fly_window_size == 3
    with pytest.warns(LossyVerificationWarning):
        assert resolve(method="ngram", num_speculative_tokens=10, rejection_sample_method="fly").fly_window_size == 6
    with pytest.warns(LossyVerificationWarning):
        spec = resolve(method="ngram", num_speculative_tokens=4, rejection_sample_method="fly", fly_window_size=2)
    assert spec.fly_window_size == 2 and spec.is_lossy
    assert "needs num_speculative_tokens >= 2" in error(method="ngram", num_speculative_tokens=1, rejection_sample_method="fly")
    assert "must be less than num_speculative_tokens (4)" in error(
        method="ngram", num_speculative_tokens=4, rejection_sample_method="fly", fly_window_size=4
    )
    assert "fly_window_size: must be >= 1" in error(method="ngram", num_speculative_tokens=4, rejection_sample_method="fly", fly_window_size=0)
    assert "only valid with rejection_sample_method='fly'" in error(method="ngram", num_speculative_tokens=4, fly_window_size=2)
    assert "needs a drafter that proposes tokens" in error(
        method="extract_hidden_states", num_speculative_tokens=4, rejection_sample_method="fly"
    )


def test_heterogeneous_vocab_rules(make_checkpoint, target):
    draft = make_checkpoint("small-draft", vocab_size=300)
    kw = {"method": "draft_model", "model": draft, "num_speculative_tokens": 2}

    def from_dict(**extra):
        return SpeculativeConfig.from_dict({**kw, **extra}, target_model_config=target)

    with pytest.raises(SpeculativeConfigError, match=r"vocabulary \(300\) differs from the target's \(256\)"):
        from_dict()
    spec = from_dict(use_heterogeneous_vocab=True)
    assert spec.draft_model_config.tokenizer == draft  # own tokenizer only with a different vocab
    with pytest.raises(SpeculativeConfigError, match="needs greedy drafts"):
        from_dict(use_heterogeneous_vocab=True, draft_sample_method="random")
    with pytest.raises(SpeculativeConfigError, match="use_local_argmax_reduction"):
        from_dict(use_heterogeneous_vocab=True, use_local_argmax_reduction=True)
    with pytest.raises(SpeculativeConfigError, match="needs a drafter with its own vocabulary"):
        SpeculativeConfig.from_dict(
            {"method": "eagle", "model": draft, "num_speculative_tokens": 2, "use_heterogeneous_vocab": True},
            target_model_config=target,
        )
    assert "only supports greedy drafts" in error(
        method="ngram", num_speculative_tokens=2, use_local_argmax_reduction=True, draft_sample_method="random"
    )


def test_pcp_needs_a_drafter_that_supports_it(make_checkpoint, target):
    pcp = ParallelConfig(prefill_context_parallel_size=2)
    path = make_checkpoint("mtp-draft", model_type="mtp")
    ok = SpeculativeConfig.from_dict({"method": "mtp", "model": path, "num_speculative_tokens": 1},
                                     target_model_config=target, target_parallel_config=pcp)
    assert ok.speculator_config.supports_pcp
    with pytest.raises(SpeculativeConfigError, match="FakeEagle does not support prefill context parallelism"):
        SpeculativeConfig.from_dict({"method": "eagle", "model": make_checkpoint("head"), "num_speculative_tokens": 1},
                                    target_model_config=target, target_parallel_config=pcp)


def test_draft_lm_head_quantization_needs_head_in_model_dtype(make_checkpoint):
    ok = resolve(method="eagle", model=make_checkpoint("e1"), num_speculative_tokens=2, draft_lm_head_quantization="fp8")
    assert ok.draft_lm_head_quantization == "fp8"
    assert "LM head in the model dtype (float32), but it is float16" in error(
        method="eagle", model=make_checkpoint("e2", head_dtype="float16"), num_speculative_tokens=2,
        draft_lm_head_quantization="fp8",
    )
    assert "allowed: 'fp8', 'nvfp4'" in error(method="eagle", model="x", num_speculative_tokens=2, draft_lm_head_quantization="int4")


def test_aux_layer_ids_are_checked_against_the_target(make_checkpoint, target):
    path = make_checkpoint("eagle3-head")
    base = {"method": "eagle3", "model": path, "num_speculative_tokens": 2}
    spec = SpeculativeConfig.from_dict({**base, "eagle_aux_hidden_state_layer_ids": [0, 2, 3]}, target_model_config=target)
    assert spec.eagle_aux_hidden_state_layer_ids == (0, 2, 3)
    # id i: the state entering layer i (vLLM/SGLang); id 4 of 4 layers is the last layer's output
    with pytest.raises(SpeculativeConfigError, match=r"layer ids must be in \[0, 4\]"):
        SpeculativeConfig.from_dict({**base, "eagle_aux_hidden_state_layer_ids": [5]}, target_model_config=target)


def test_prompt_lookup_window():
    assert "prompt_lookup_min: must be <= prompt_lookup_max (2)" in error(
        method="ngram", num_speculative_tokens=2, prompt_lookup_min=3, prompt_lookup_max=2
    )


def test_trace_and_to_dict_are_json_friendly():
    spec = resolve(method="ngram", num_speculative_tokens=3, num_speculative_tokens_per_batch_size=[[1, 4, 2]])
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["num_speculative_tokens_per_batch_size"] == [[1, 4, 2]] and data["method"] == "ngram"
    assert spec.resolution_trace[0][0] == "input" and spec.resolution_trace[-1][0] == "result"


def _my_eagle3_with_options(make_checkpoint, target):
    """A resolved third-party method with a mapping option (the values hashing and pickling walk)."""
    register_speculative_method("my_eagle3", core_fakes.MyEagle3)
    return SpeculativeConfig.from_dict(
        {"method": "my_eagle3", "model": make_checkpoint("h"), "num_speculative_tokens": 2,
         "speculator_options": {"depth": 2}},
        target_model_config=target,
    )


def test_resolved_configs_are_hashable(make_checkpoint, target):
    spec = _my_eagle3_with_options(make_checkpoint, target)
    assert hash(spec) == hash(spec.replace()) and spec == spec.replace()
    assert {spec: 1}[spec.replace()] == 1


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        ({"num_speculative_tokens": "3"}, "Bad.configure set an invalid value: speculative_config.num_speculative_tokens: expected int"),
        ({"prompt_lookup_min": 0}, "prompt_lookup_min: must be >= 1"),
        ({"target_model_config": None}, "may not change the injected field 'target_model_config'"),
        ({"draft_model_config": {}}, "set draft_model_config to a dict, expected ModelConfig"),
    ],
)
def test_configure_updates_are_type_checked(updates, message):
    @attrs.frozen(kw_only=True)
    class Bad(core_fakes.FakeNgram):
        @classmethod
        def configure(cls, spec):
            return updates

    register_speculative_method("bad_updates", Bad)
    assert message in error(method="bad_updates", num_speculative_tokens=2)


@pytest.mark.parametrize("hook", ["configure", "default_model", "specialize", "verify", "num_lookahead_tokens"])
def test_a_buggy_plugin_hook_is_a_one_line_error(hook):
    def boom(*args):
        raise KeyError("oops")

    namespace = {hook: property(boom) if hook == "num_lookahead_tokens" else classmethod(boom)}
    Buggy = attrs.frozen(kw_only=True)(type("Buggy", (core_fakes.FakeNgram,), namespace))
    register_speculative_method("buggy", Buggy)
    assert f"Buggy.{hook} failed: KeyError: 'oops'" in error(method="buggy", num_speculative_tokens=2)


def test_properties_must_be_non_negative_ints():
    @attrs.frozen(kw_only=True)
    class Negative(core_fakes.FakeNgram):
        @property
        def max_num_new_slots_for_drafting(self):
            return -1

    register_speculative_method("negative", Negative)
    assert "Negative.max_num_new_slots_for_drafting must be an int >= 0 (got -1)" in error(method="negative", num_speculative_tokens=2)


def test_resolved_configs_pickle(make_checkpoint, target):
    import pickle

    spec = _my_eagle3_with_options(make_checkpoint, target)
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and again.compute_hash() == spec.compute_hash()
    assert again.speculator_config.spec is again and dict(again.speculator_options) == {"depth": 2}
    with pytest.raises(TypeError, match="read-only"):
        again.speculator_options["depth"] = 3


def test_a_requested_custom_method_on_a_checkpoint_declaring_its_base(fresh_plugins, make_checkpoint):
    # only the custom method is registered: the eagle3 plugin is not installed and not needed
    register_speculative_method("my_eagle3", core_fakes.MyEagle3)
    path = make_checkpoint("declares-eagle3", speculator_config_class="eagle3")
    spec = resolve(method="my_eagle3", model=path, num_speculative_tokens=2)
    assert type(spec.speculator_config) is core_fakes.MyEagle3 and spec.method == "eagle3"
    assert "is a 'eagle3' checkpoint" not in str(spec.resolution_trace)
    other = make_checkpoint("declares-mtp", speculator_config_class="deepseek_mtp")
    assert "is a 'mtp' checkpoint" in error(method="my_eagle3", model=other, num_speculative_tokens=2)


# -- options a method does not use, sizes and names ----------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "refused_by", "accepted_by"),
    [
        ("prompt_lookup_min", 3, "eagle3", "ngram"),
        ("prompt_lookup_max", 7, "draft_model", "ngram_gpu"),
        ("disable_eagle_block_drop", True, "ngram", "eagle3"),
        ("eagle_aux_hidden_state_layer_ids", [0, 1, 2], "ngram", "eagle3"),
        ("eagle_aux_hidden_state_layer_ids", [0, 1, 2], "draft_model", "eagle3"),
        ("parallel_drafting", True, "ngram", "draft_model"),
        ("enable_adaptive_verification", True, "ngram", "dspark"),
        ("suffix_decoding_max_tree_depth", 4, "ngram", None),
    ],
)
def test_options_a_method_does_not_use_are_refused(make_checkpoint, option, value, refused_by, accepted_by):
    path = make_checkpoint("eagle3-draft")
    text = error(method=refused_by, model=path, num_speculative_tokens=3, **{option: value})
    assert text.startswith(f"speculative_config.{option}: is not supported by method {refused_by!r}")
    if accepted_by is not None:
        resolve(method=accepted_by, model=path, num_speculative_tokens=3, **{option: value})


def test_an_option_filled_in_by_the_class_itself_is_not_the_users():
    spec = resolve(method="ngram", num_speculative_tokens=2)  # FakeNgram.configure sets prompt_lookup_*
    register_speculative_method("plain_ngram", core_fakes.MyNgram)
    assert (spec.prompt_lookup_min, resolve(method="plain_ngram", num_speculative_tokens=2).prompt_lookup_min) == (5, 5)


@pytest.mark.parametrize("k", [10**100, 1025])
def test_an_absurd_k_is_refused(k):
    assert error(method="ngram", num_speculative_tokens=k).startswith(
        "speculative_config.num_speculative_tokens: must be <= 1024"
    )


@pytest.mark.parametrize("field", ["kv_cache_dtype", "quantization", "attention_backend", "moe_backend"])
@pytest.mark.parametrize("value", ["fp8\n", "auto\x1b[31m", " fp8", "x" * 200])
def test_free_form_names_are_plain(field, value):
    assert f"speculative_config.{field}: must be" in error(method="ngram", num_speculative_tokens=2, **{field: value})


def test_method_specific_options_are_declared_by_the_schema():
    from specpath.config.speculative import METHOD_SPECIFIC_OPTIONS, supports_option

    assert {"prompt_lookup_min", "parallel_drafting", "enable_adaptive_verification",
            "suffix_decoding_max_tree_depth", "dspark_draft_topk"} <= set(METHOD_SPECIFIC_OPTIONS)
    assert supports_option(core_fakes.FakeEagle3, "disable_eagle_block_drop")  # by capability
    assert supports_option(core_fakes.FakeDSpark, "dspark_draft_topk")  # by supported_options
    assert supports_option(core_fakes.FakeDSpark, "xpress_topc")  # DSpark's tree drafts
    assert not supports_option(core_fakes.FakeEagle3, "xpress_topc")
    assert not supports_option(core_fakes.FakeNgram, "parallel_drafting")
