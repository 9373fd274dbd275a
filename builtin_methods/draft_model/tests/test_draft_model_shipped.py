"""The shipped drafts run out of the box on the embedded default model: resolved by default,
greedy output identical to plain decoding, and some drafts accepted."""

import pytest

from specpath_engine.harness import DEMO_PROMPTS
from specpath_engine.testing.engine import greedy_identity
from specpath_draft_model.config import shipped_draft


@pytest.mark.parametrize("options", [{}, {"parallel_drafting": True}, {"use_heterogeneous_vocab": True}],
                         ids=["ar", "pard", "bpe"])
def test_shipped_draft_on_the_default_model(options):
    from specpath_engine.model import default_model_path

    result = greedy_identity({"method": "draft_model", "num_speculative_tokens": 4, **options},
                             prompts=list(DEMO_PROMPTS[:2]), max_tokens=32, model=str(default_model_path()))
    assert result.speculative == result.plain, result.describe()
    assert result.num_accepted_tokens > 0


def test_every_shape_ships():
    for kind in ("autoregressive", "parallel", "heterogeneous"):
        assert shipped_draft(kind) is not None
