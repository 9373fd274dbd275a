"""The specpath conformance kit, applied to ``custom_class`` with a proposer of each contract."""

from specpath_engine.testing import MODEL_FREE_FLAGS, SpeculatorConformance, conformance_tests
from specpath_custom_class.config import CustomClassSpeculatorConfig


class _TrustedTarget(SpeculatorConformance):
    def resolve(self, **fields):
        """With a target that trusts remote code (the kit's default resolve has no target)."""
        from specpath.config.model import ModelConfig
        from specpath.config.speculative import SpeculativeConfig
        from specpath_engine.testing.engine import tiny_checkpoint

        target = ModelConfig(model=tiny_checkpoint(), trust_remote_code=True)
        return SpeculativeConfig.from_dict({"method": self.method, **self.base_config, **fields},
                                           target_model_config=target)


CUSTOM_CLASS = dict(
    base=_TrustedTarget,
    engine_options={"trust_remote_code": True},
    lookahead=(0, 0, 0),
    flags={**MODEL_FREE_FLAGS, "base_method": "custom_class", "supports_variable_draft_length": True},
    valid=[{"speculator_options": {"window": 3}}],
    invalid=[
        ({"model": "proposers.NotAProposer"}, "is neither a specpath.speculator.BaseSpeculator nor a vLLM"),
        ({"model": "proposers.not_a_class"}, "is not a class"),
        ({"model": "proposers.Missing"}, "cannot import it"),
        ({"model": "no_such_module_xyz.Proposer"}, "cannot import it"),
    ],
    hash_sensitive=[({"model": "proposers.LastTokenProposer"}, {"model": "proposers.CopySpeculator"})],
)

TestVllmProposerConformance = conformance_tests(
    "custom_class", CustomClassSpeculatorConfig, base_config={"model": "proposers.LastTokenProposer"}, **CUSTOM_CLASS)
TestSpecpathSpeculatorConformance = conformance_tests(
    "custom_class", CustomClassSpeculatorConfig, base_config={"model": "proposers:CopySpeculator"}, **CUSTOM_CLASS)
