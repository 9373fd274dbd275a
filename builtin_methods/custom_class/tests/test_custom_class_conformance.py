"""The specpath conformance kit, applied to ``custom_class`` with a proposer of each contract."""


from specpath.testing import SpeculatorConformance
from specpath_custom_class.config import CustomClassSpeculatorConfig


class CustomClassConformance(SpeculatorConformance):
    method = "custom_class"
    config_class = CustomClassSpeculatorConfig
    distribution = "specpath-custom-class"
    engine_options = {"trust_remote_code": True}
    expected = {
        "num_lookahead_tokens": lambda k: 0,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 0,
    }
    expected_flags = {
        "base_method": "custom_class",
        "uses_target_hidden_states": False,
        "uses_separate_workspace_lane": False,
        "draft_has_own_vocab": False,
        "supports_pcp": False,
        "supports_variable_draft_length": True,
    }
    valid_options = [{"speculator_options": {"window": 3}}]
    invalid_options = [
        ({"model": "proposers.NotAProposer"}, "is neither a specpath.speculator.BaseSpeculator nor a vLLM"),
        ({"model": "proposers.not_a_class"}, "is not a class"),
        ({"model": "proposers.Missing"}, "cannot import it"),
        ({"model": "no_such_module_xyz.Proposer"}, "cannot import it"),
    ]
    hash_sensitive_options = [
        ({"model": "proposers.LastTokenProposer"}, {"model": "proposers.CopySpeculator"}),
    ]

    def resolve(self, **fields):
        """With a target that trusts remote code (the kit's default resolve has no target)."""
        from specpath.config.model import ModelConfig
        from specpath.config.speculative import SpeculativeConfig
        from specpath.testing.engine import tiny_checkpoint

        target = ModelConfig(model=tiny_checkpoint(), trust_remote_code=True)
        return SpeculativeConfig.from_dict({"method": self.method, **self.base_config, **fields},
                                           target_model_config=target)


class TestVllmProposerConformance(CustomClassConformance):
    base_config = {"model": "proposers.LastTokenProposer"}


class TestSpecpathSpeculatorConformance(CustomClassConformance):
    base_config = {"model": "proposers:CopySpeculator"}


CustomClassConformance.__test__ = False  # shared base
