"""The eagle and eagle3 plugins each recognise their own heads (``specpath_eagle.recognise``,
``specpath_eagle3.recognise``): on any ``config.json`` at most one claims it, both agree on
whether it names an EAGLE head at all (then no path hint is asked), and every such config is
claimed by exactly one of them; their path hints never both fire."""

from hypothesis import given
from hypothesis import strategies as st

from specpath_eagle import recognise as eagle
from specpath_eagle3 import recognise as eagle3

NAMES = st.sampled_from(["eagle", "eagle3", "peagle", "EAGLE", "Eagle3LlamaForCausalLM", "EagleLlamaForCausalLM",
                         "PEagleDraftModel", "LlamaForCausalLMEagle3", "llama", "LlamaForCausalLM", "mtp", ""])
CONFIGS = st.fixed_dictionaries({}, optional={
    "model_type": st.one_of(NAMES, st.integers()),
    "speculators_model_type": NAMES,
    "architectures": st.one_of(st.lists(st.one_of(NAMES, st.none()), max_size=3), NAMES),
})


@given(CONFIGS)
def test_exactly_one_plugin_claims_an_eagle_config(config):
    mine, theirs = eagle.is_eagle_checkpoint(config), eagle3.is_eagle3_checkpoint(config)
    assert not (mine and theirs)
    assert eagle.says_eagle(config) == eagle3.says_eagle(config) == (mine or theirs)


@given(st.text(alphabet="eagl3-/x", max_size=16))
def test_path_hints_never_both_fire(path):
    assert not (eagle.path_says_eagle(path) and eagle3.path_says_eagle3(path))
    assert eagle.path_says_eagle(path) or eagle3.path_says_eagle3(path) or "eagle3" not in path.lower()
