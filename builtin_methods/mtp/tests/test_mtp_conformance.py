"""The specpath conformance kit, for one-module and three-module MTP checkpoints.

The kit's engine test and speculator contexts use its tiny random-weight target; the MTP
checkpoints here are random modules shaped for that target (written once per process)."""

import atexit
import tempfile

from specpath.testing import SpeculatorConformance
from specpath.testing.engine import tiny_checkpoint
from specpath_mtp.config import MTPSpeculatorConfig, MultiModuleMTPSpeculatorConfig
from specpath_mtp.module import random_mtp_checkpoint

_DIR = tempfile.TemporaryDirectory(prefix="specpath-mtp-conformance-")
atexit.register(_DIR.cleanup)
MTP1 = str(random_mtp_checkpoint(tiny_checkpoint(), f"{_DIR.name}/mtp1", 1, seed=1))
MTP3 = str(random_mtp_checkpoint(tiny_checkpoint(), f"{_DIR.name}/mtp3", 3, seed=3))

FLAGS = {
    "uses_target_hidden_states": True,
    "uses_separate_workspace_lane": False,
    "draft_has_own_vocab": False,
    "draft_kv_depends_on_next_token": True,
    "base_method": "mtp",
}


class MTPConformance(SpeculatorConformance):
    method = "mtp"
    distribution = "specpath-mtp"
    valid_options = [{"index_share_for_mtp_iteration": True}, {"index_share_for_mtp_iteration": False}]
    invalid_options = [
        ({"index_share_for_mtp_iteration": "yes"}, "index_share_for_mtp_iteration"),
        ({"parallel_drafting": True}, "parallel_drafting"),
        ({"eagle_aux_hidden_state_layer_ids": [0]}, "eagle_aux_hidden_state_layer_ids"),
    ]
    hash_sensitive_options = [({"index_share_for_mtp_iteration": False}, {"index_share_for_mtp_iteration": True})]


class TestSingleModuleMTPConformance(MTPConformance):
    config_class = MTPSpeculatorConfig
    base_config = {"model": MTP1}
    expected = {
        "num_lookahead_tokens": lambda k: k,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 1,
    }
    expected_flags = {**FLAGS, "supports_pcp": True}


class TestMultiModuleMTPConformance(MTPConformance):
    config_class = MultiModuleMTPSpeculatorConfig
    base_config = {"model": MTP3}
    k_values = (1, 2, 3, 6)  # above n_predict = 3, K must be a multiple of it
    expected = {
        "num_lookahead_tokens": lambda k: k,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: k,
    }
    expected_flags = {**FLAGS, "supports_pcp": False}

    def resolve_engine_config(self, **fields):
        """The kit's engine test picks K = 4, not a multiple of n_predict = 3: use 3."""
        return super().resolve_engine_config(**{**fields, "num_speculative_tokens": 3})

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


MTPConformance.__test__ = False  # the kit marks every subclass a test class; this one is shared
