"""specpath demo's table logic (specpath_engine.demo_table): no timing, only what rows may claim."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, strategies as st

from specpath_engine import demo_table as dt


@given(st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=12, unique=True), st.integers(0, 1000))
def test_rotation_puts_every_engine_in_every_place_once_per_cycle(names, start):
    places = Counter()
    for turn in range(start, start + len(names)):
        order = dt.rotation(names, turn)
        assert sorted(order) == sorted(names)
        places.update((name, i) for i, name in enumerate(order))
    assert set(places.values()) == {1} and len(places) == len(names) ** 2


def _row(method, tokens, steps, tps, speedup, **kw):
    return {"method": method, "tokens": tokens, "target_steps": steps, "tokens_per_s": tps, "speedup": speedup, **kw}


BASE = _row("baseline", 616, 616, 16.8, 1.0)


def test_passes_bound_flags_the_impossible_speedup_from_the_issue():
    # issue 31: eagle3 8.95x with τ about 2 (312 passes for the baseline's 616): at most about 2x
    eagle3 = _row("eagle3", 616, 312, 150.4, 8.95)
    assert abs(dt.speedup_bound(eagle3, BASE) - 616 / 312) < 1e-9
    assert dt.implausible(eagle3, BASE)
    assert not dt.implausible(_row("eagle3", 616, 312, 30.0, 1.8), BASE)
    assert not dt.implausible(BASE, BASE)
    lines = dt.summary_lines([BASE, eagle3], BASE)
    assert lines[0] == "fastest: no method beat the baseline here"  # the flagged row is no result
    assert lines[1].startswith("! eagle3: 8.95x is more than its target passes allow (at most 1.97x")


def test_tokens_per_pass_counts_every_step_not_only_drafted_ones():
    # ngram: τ 3.58 over its drafted steps, but 554 passes for 616 tokens: the fewest saved
    ngram = _row("ngram", 616, 554, 18.0, 1.07)
    eagle3 = _row("eagle3", 616, 312, 30.0, 1.8)
    assert dt.tokens_per_pass(616, 554) < dt.tokens_per_pass(616, 312)
    assert dt.passes_cell(ngram, BASE) == "554 (-10%)"
    assert dt.passes_cell(eagle3, BASE) == "312 (-49%)"
    assert dt.passes_cell(BASE, BASE) == "616"
    assert dt.passes_cell(_row("none", 616, 616, 16.0, 0.95), BASE) == "616 (+0%)"
    assert dt.tokens_per_pass(5, 0) == 0.0


def test_sorted_by_speed_and_the_fastest_is_named():
    rows = [BASE, _row("ngram", 616, 554, 18.0, 1.07), _row("eagle3", 616, 312, 30.0, 1.8),
            _row("slow", 616, 400, 10.0, 0.6)]
    assert [r["method"] for r in dt.sort_rows(rows)] == ["eagle3", "ngram", "baseline", "slow"]
    assert dt.fastest(rows, BASE)["method"] == "eagle3"
    assert dt.summary_lines(rows, BASE) == ["fastest: eagle3 (1.80x the baseline, 30.0 tok/s)"]


def test_speedup_cell_shows_the_per_prompt_range_and_the_flag():
    row = _row("suffix", 616, 300, 30.0, 1.5, turn_speedups=[1.2, 1.9, 1.4])
    assert dt.speedup_cell(row, BASE) == "1.50x (1.20-1.90)"
    assert dt.speedup_cell(_row("x", 616, 600, 90.0, 5.0, turn_speedups=[5.0]), BASE) == "5.00x !"
    assert dt.speedup_cell(BASE, BASE) == "1.00x"
    assert dt.spread([]) is None and dt.spread([2.0, 1.0]) == (1.0, 2.0)


@given(tokens=st.integers(1, 5000), steps=st.integers(1, 5000), base_steps=st.integers(1, 5000),
       speedup=st.floats(0, 100, allow_nan=False))
def test_flag_is_exactly_above_the_bound_with_slack(tokens, steps, base_steps, speedup):
    base = _row("baseline", base_steps, base_steps, 1.0, 1.0)
    row = _row("m", tokens, steps, speedup, speedup)
    assert dt.implausible(row, base) == (speedup > dt.PLAUSIBLE_SLACK * (tokens / steps))


class _Flags:
    model_free = False
    example_plugin = False
    accelerator_only = False


def test_kind_and_device_come_from_capability_flags():
    free = type("Free", (_Flags,), {"model_free": True})
    example = type("Example", (_Flags,), {"model_free": True, "example_plugin": True})
    gpu = type("Gpu", (_Flags,), {"model_free": True, "accelerator_only": True})
    assert dt.kind(None) == "-"
    assert dt.kind(_Flags) == "draft model"
    assert dt.kind(free) == "model-free"
    assert dt.kind(example) == "example plugin, model-free"
    assert not dt.shown_on(gpu, "cpu") and dt.shown_on(gpu, "cuda") and dt.shown_on(free, "cpu")


def test_shipped_methods_declare_what_the_demo_shows():
    from specpath import plugins
    from specpath.registry import get_registry

    plugins.load_all()
    registry = get_registry()
    assert dt.kind(registry.get("ngram").config_class) == "model-free"
    assert dt.kind(registry.get("eagle3").config_class) == "draft model"
    assert not dt.shown_on(registry.get("ngram_gpu").config_class, "cpu")
    assert dt.shown_on(registry.get("ngram").config_class, "cpu")


def test_the_demo_leaves_accelerator_methods_out_on_a_cpu():
    from specpath_engine.cli_run import demo_configs

    runs, skipped = demo_configs(4, {"ngram", "ngram_gpu"})
    assert [name for name, _ in runs] == ["ngram"]
    assert dict(skipped)["ngram_gpu"].startswith("built for an accelerator")


def test_a_drafter_below_the_default_bar_on_every_prompt_is_named_as_no_default():
    # issue 30: a drafter that cannot reach 1.1x on any prompt is not a default for the target
    weak = _row("dspark", 616, 560, 17.0, 1.01, kind="draft model", turn_speedups=[0.95, 1.04, 1.08])
    good = _row("eagle3", 616, 400, 20.0, 1.19, kind="draft model", turn_speedups=[1.02, 1.31])
    free = _row("ngram", 616, 600, 16.9, 1.01, kind="model-free", turn_speedups=[0.99, 1.02])
    lines = dt.summary_lines([BASE, weak, good, free], BASE)
    assert lines[0].startswith("fastest: eagle3")
    notes = [line for line in lines if line.startswith("not a default for this target:")]
    assert len(notes) == 1
    assert "dspark (best prompt 1.08x)" in notes[0]
    assert "eagle3" not in notes[0] and "ngram" not in notes[0]  # model-free methods cost no drafter
    assert not [line for line in dt.summary_lines([BASE, good], BASE) if line.startswith("not a default")]
