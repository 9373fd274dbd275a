"""The ``eagle3`` speculator: the shared hidden-state drafting loop over an EAGLE-3 head,
chained or (``parallel_drafting``) P-EAGLE in one pass."""

from __future__ import annotations

from specpath_drafting.config import default_aux_layer_ids, engine_layers
from specpath_drafting.heads import HiddenStateHead, load_head_weights, read_head_config
from specpath_drafting.loop import HiddenStateSpeculator, target_layers
from specpath_eagle3.head import Eagle3Head


class Eagle3Speculator(HiddenStateSpeculator):
    def build_head(self) -> HiddenStateHead:
        path = self.spec.model
        config = read_head_config(path, "eagle3")
        taps = self.hidden_state_layers
        if len(taps) != config.num_taps:
            raise ValueError(
                f"eagle_aux_hidden_state_layer_ids {list(taps)}: the head fuses exactly {config.num_taps} layers"
            )
        return load_head_weights(Eagle3Head(config, embed_tokens=self.context.embed_tokens), path)

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        ids = self.spec.eagle_aux_hidden_state_layer_ids
        return engine_layers(ids if ids is not None else default_aux_layer_ids(target_layers(self.context)))
