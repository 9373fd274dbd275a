"""The specpath conformance kit, for the three drafting shapes of draft_model."""

import tiny_drafts
from specpath.testing import SpeculatorConformance
from specpath_draft_model.config import StandaloneARSpeculatorConfig

FLAGS = {
    "base_method": "draft_model",
    "uses_target_hidden_states": False,
    "uses_separate_workspace_lane": False,
    "draft_has_own_vocab": True,
    "draft_kv_depends_on_next_token": False,
    "supports_pcp": False,
}


class DraftModelConformance(SpeculatorConformance):
    method = "draft_model"
    config_class = StandaloneARSpeculatorConfig
    distribution = "specpath-draft-model"
    expected_flags = FLAGS
    engine_max_tokens = 32


class TestAutoregressiveConformance(DraftModelConformance):
    base_config = {"model": tiny_drafts.path("self")}
    # The draft's own KV runs K ahead; it re-reads the bonus token (1 extra slot).
    expected = {
        "num_lookahead_tokens": lambda k: k,
        "max_num_new_slots_for_drafting": lambda k: 1,
        "num_prefill_lookahead_tokens": lambda k: 0,
    }
    valid_options = [
        {"draft_sample_method": "random"},
        {"draft_tensor_parallel_size": 1},
        {"max_model_len": 128},
    ]
    invalid_options = [
        ({"parallel_drafting": True}, "pard_token_id"),
        ({"draft_tensor_parallel_size": 2}, "draft_tensor_parallel_size"),
        ({"use_heterogeneous_vocab": True, "draft_sample_method": "random"}, "draft_sample_method"),
        ({"use_heterogeneous_vocab": True, "use_local_argmax_reduction": True}, "use_local_argmax_reduction"),
    ]
    hash_sensitive_options = [({}, {"use_heterogeneous_vocab": True})]


class TestParallelConformance(DraftModelConformance):
    base_config = {"model": tiny_drafts.path("pard"), "parallel_drafting": True}
    # PARD: every one of the K queries is a new position.
    expected = {
        "num_lookahead_tokens": lambda k: k,
        "max_num_new_slots_for_drafting": lambda k: k,
        "num_prefill_lookahead_tokens": lambda k: 0,
    }
    valid_options = [{"draft_sample_method": "random"}]
    invalid_options = [({"use_heterogeneous_vocab": True}, "parallel_drafting")]
    hash_sensitive_options = [({}, {"parallel_drafting": False})]


class TestHeterogeneousVocabConformance(DraftModelConformance):
    base_config = {"model": tiny_drafts.path("bpe"), "use_heterogeneous_vocab": True}
    expected = {
        "num_lookahead_tokens": lambda k: k,
        "max_num_new_slots_for_drafting": lambda k: 1,
        "num_prefill_lookahead_tokens": lambda k: 0,
    }
    valid_options = [{"max_model_len": 128}]
    invalid_options = [({"draft_sample_method": "random"}, "needs greedy drafts")]


DraftModelConformance.__test__ = False  # shared settings; the subclasses are the tests
