"""specpath demo's report of where a method's greedy output parts from the baseline's."""

import torch

from specpath_engine.cli_run import _divergence_margins, _identity_cell


class CountingModel:
    """Logits whose top-2 gap is the prefix length / 10; counts its passes."""

    def __init__(self):
        self.calls = 0

    def forward_batch(self, ids, *, last_only=False):
        self.calls += 1
        logits = torch.zeros(1, 1, 8)
        logits[0, 0, 3] = ids.shape[-1] / 10
        return logits


def test_margins_are_taken_where_each_prompt_parts_once_per_prefix():
    model = CountingModel()
    tokens = {"baseline": [[1, 2, 3], [4, 5]], "a": [[1, 9, 9], [4, 5]], "b": [[1, 7], [4, 5, 6]]}
    got = _divergence_margins(model, [[0, 0], [0]], tokens)
    assert got["baseline"] == [] and got["a"] == [{"prompt": 0, "token": 1, "margin": 0.30000001192092896}]
    assert [(m["prompt"], m["token"]) for m in got["b"]] == [(0, 1)]  # a longer output than the baseline's is not a divergence
    assert model.calls == 1  # a and b part at the same prefix: one pass


def test_the_identity_cell_names_the_margins():
    row = {"greedy_identical": False, "num_prompts": 6, "identical_prompts": 4,
           "divergence_margins": [{"prompt": 1, "token": 9, "margin": 0.0625}, {"prompt": 4, "token": 30, "margin": 0.0}]}
    assert _identity_cell(row) == "NO (2/6 differ; top-2 margin 0.06 0.00)"
    assert _identity_cell({**row, "greedy_identical": True}) == "yes"
    assert _identity_cell({**row, "divergence_margins": []}) == "NO (2/6 differ)"


def test_demo_configs_report_a_plugins_reason_and_a_broken_answer(fresh_plugins):
    import core_fakes
    from specpath import demo
    from specpath.hookspecs import hookimpl
    from specpath_engine.cli_run import demo_configs

    class Demos:
        @hookimpl
        def specpath_demo(self, method):
            if method == "ngram":
                return demo.leave_out("not today")
            if method == "ngram_gpu":
                return "garbage"
            return demo.run(num_speculative_tokens=2) if method == "eagle" else None

    pm = fresh_plugins.get_plugin_manager()
    pm.register(core_fakes.BuiltinFakesPlugin())
    pm.register(Demos())
    runs, skipped = demo_configs(5, {"ngram", "ngram_gpu", "eagle", "mtp"})
    reasons = dict(skipped)
    assert reasons["ngram"] == "not today"
    assert reasons["ngram_gpu"].startswith("its specpath_demo hook failed: specpath_demo for 'ngram_gpu' returned str")
    assert dict(runs)["eagle"] == {"num_speculative_tokens": 2, "method": "eagle"}  # the hook's K wins
    assert dict(runs)["mtp"] == {"num_speculative_tokens": 5, "method": "mtp"}  # nobody answers: the core's default
