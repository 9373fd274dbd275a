"""The specpath conformance kit, for the three drafting shapes of draft_model."""

import tiny_drafts
from specpath_engine.testing import MODEL_FREE_FLAGS, conformance_tests
from specpath_draft_model.config import StandaloneARSpeculatorConfig

# A model of its own, on token ids only: the model-free flags but its own vocabulary.
DRAFT_MODEL = dict(
    engine_max_tokens=32,
    flags={**MODEL_FREE_FLAGS, "base_method": "draft_model", "model_free": False, "draft_has_own_vocab": True,
           "draft_kv_depends_on_next_token": False},
)

# The draft's own KV runs K ahead; it re-reads the bonus token (1 extra slot).
TestAutoregressiveConformance = conformance_tests(
    "draft_model", StandaloneARSpeculatorConfig, base_config={"model": tiny_drafts.path("self")},
    lookahead=(lambda k: k, 1, 0),
    valid=[{"draft_sample_method": "random"}, {"draft_tensor_parallel_size": 1}, {"max_model_len": 128}],
    invalid=[
        ({"parallel_drafting": True}, "pard_token_id"),
        ({"draft_tensor_parallel_size": 2}, "draft_tensor_parallel_size"),
        ({"use_heterogeneous_vocab": True, "draft_sample_method": "random"}, "draft_sample_method"),
        ({"use_heterogeneous_vocab": True, "use_local_argmax_reduction": True}, "use_local_argmax_reduction"),
    ],
    hash_sensitive=[({}, {"use_heterogeneous_vocab": True})], **DRAFT_MODEL)

# PARD: every one of the K queries is a new position.
TestParallelConformance = conformance_tests(
    "draft_model", StandaloneARSpeculatorConfig, base_config={"model": tiny_drafts.path("pard"), "parallel_drafting": True},
    lookahead=(lambda k: k, lambda k: k, 0), valid=[{"draft_sample_method": "random"}],
    invalid=[({"use_heterogeneous_vocab": True}, "parallel_drafting")],
    hash_sensitive=[({}, {"parallel_drafting": False})], **DRAFT_MODEL)

TestHeterogeneousVocabConformance = conformance_tests(
    "draft_model", StandaloneARSpeculatorConfig,
    base_config={"model": tiny_drafts.path("bpe"), "use_heterogeneous_vocab": True},
    lookahead=(lambda k: k, 1, 0), valid=[{"max_model_len": 128}],
    invalid=[({"draft_sample_method": "random"}, "needs greedy drafts")], **DRAFT_MODEL)
