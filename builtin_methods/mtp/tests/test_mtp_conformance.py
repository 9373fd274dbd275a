"""The specpath conformance kit, for one-module and three-module MTP checkpoints.

The kit's engine test and speculator contexts use its tiny random-weight target; the MTP
checkpoints here are random modules shaped for that target (written once per process)."""

import atexit
import tempfile

from specpath_engine.testing import conformance_tests
from specpath_engine.testing.engine import tiny_checkpoint
from specpath_drafting.testing import TARGET_STATE_FLAGS
from specpath_mtp.config import MTPSpeculatorConfig, MultiModuleMTPSpeculatorConfig
from specpath_mtp.module import random_mtp_checkpoint

_DIR = tempfile.TemporaryDirectory(prefix="specpath-mtp-conformance-")
atexit.register(_DIR.cleanup)
MTP1 = str(random_mtp_checkpoint(tiny_checkpoint(), f"{_DIR.name}/mtp1", 1, seed=1))
MTP3 = str(random_mtp_checkpoint(tiny_checkpoint(), f"{_DIR.name}/mtp3", 3, seed=3))

FLAGS = {**TARGET_STATE_FLAGS, "uses_separate_workspace_lane": False, "draft_kv_depends_on_next_token": True,
         "base_method": "mtp"}
MTP = dict(
    valid=[{"index_share_for_mtp_iteration": True}, {"index_share_for_mtp_iteration": False}],
    invalid=[
        ({"index_share_for_mtp_iteration": "yes"}, "index_share_for_mtp_iteration"),
        ({"parallel_drafting": True}, "parallel_drafting"),
        ({"eagle_aux_hidden_state_layer_ids": [0]}, "eagle_aux_hidden_state_layer_ids"),
    ],
    hash_sensitive=[({"index_share_for_mtp_iteration": False}, {"index_share_for_mtp_iteration": True})],
)

TestSingleModuleMTPConformance = conformance_tests(
    "mtp", MTPSpeculatorConfig, base_config={"model": MTP1}, lookahead=(lambda k: k, 0, 1),
    flags={**FLAGS, "supports_pcp": True}, **MTP)

MultiModuleMTPConformance = conformance_tests(
    "mtp", MultiModuleMTPSpeculatorConfig, base_config={"model": MTP3}, lookahead=(lambda k: k, 0, lambda k: k),
    k_values=(1, 2, 3, 6),  # above n_predict = 3, K must be a multiple of it
    flags={**FLAGS, "supports_pcp": False}, __test__=False, **MTP)


class TestMultiModuleMTPConformance(MultiModuleMTPConformance):
    __test__ = True

    def resolve_engine_config(self, **fields):
        """The kit's engine test picks K = 4, not a multiple of n_predict = 3: use 3; it drafts
        every step (the measured policy may back off to plain steps with three random modules)."""
        return super().resolve_engine_config(**{**fields, "num_speculative_tokens": 3, "draft_length_policy": "fixed"})

    def test_method_resolves_to_config_class_through_the_plugin_index(self) -> None:
        """The plugin binds ``mtp`` to the single-module class; a multi-module checkpoint
        reaches ``MultiModuleMTPSpeculatorConfig`` through ``specialize`` (the kit's version of
        this test expects the bound class itself)."""
        from specpath import plugins
        from specpath.registry import get_registry

        plugins.load(self.method)
        assert get_registry().get(self.method).config_class is MTPSpeculatorConfig
        assert issubclass(self.config_class, MTPSpeculatorConfig)
        spec = self.resolve(num_speculative_tokens=3)
        assert any("specialize" in detail for _, detail in spec.resolution_trace)
