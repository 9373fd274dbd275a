"""``specpath bench`` end to end on the embedded model (tiny budgets), and its report."""

import json
import statistics

import pytest

from specpath.cli import main
from specpath_engine.bench import report
from specpath_engine.bench.measure import Setting, build_engines, measure
from specpath_engine.bench.workloads import Workload

WORKLOAD = Workload(name="tiny", items=("def add(a, b):\n", "class Point:\n    def __init__(self, x, y):\n"))


@pytest.fixture(scope="module")
def engines():
    runs = [("baseline", None), ("ngram", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3})]
    built, skipped = build_engines(runs, model=None, engine_kwargs={"num_threads": 1}, progress=lambda _: None)
    assert skipped == []
    return built


def test_rows_against_the_same_rounds_baseline(engines):
    rows = measure(engines, Setting(workload=WORKLOAD, batch_size=1, temperature=0.0, max_tokens=12),
                   repeats=2, progress=lambda _: None)
    base, ngram = rows
    assert (base["method"], ngram["method"]) == ("baseline", "ngram")
    assert base["speedups"] == [1.0, 1.0] and base["tokens_per_target_pass"] == pytest.approx(1.0)
    assert len(ngram["speedups"]) == 2 and len(ngram["per_batch_speedup"]) == 2
    assert ngram["greedy_identical"] is True and ngram["identical_requests"] == 2
    assert ngram["tokens_per_target_pass"] >= 1.0
    assert ngram["target_passes"] * ngram["tokens_per_target_pass"] == pytest.approx(2 * 12)


def test_the_baseline_runs_among_the_others_and_its_median_is_the_reference(monkeypatch):
    """Timed once a round, one slow baseline run tilted every row of the round; it runs again after
    every REFERENCE_EVERY engines and last, and the median of its runs is the reference."""
    from types import SimpleNamespace

    from specpath_engine.bench import measure as m
    from specpath_engine.metrics import SpecMetrics

    names = [f"m{i}" for i in range(7)]
    order = [(n, None, None) for n in ("m3", "baseline", *names[:3], *names[4:])]
    sequence = [name for name, _, _ in m._with_references(order, ("baseline", None, None))]
    assert sequence == ["baseline", "m3", "m0", "m1", "baseline", "m2", "m4", "m5", "baseline", "m6", "baseline"]
    assert m.runs_per_batch(8, "batch") == len(sequence) and m.runs_per_batch(1, "batch") == 1
    assert m.runs_per_batch(2, "batch") == 3 and m.runs_per_batch(8) == 8

    times = {"baseline": [1.0, 3.0, 1.2, 0.9], **{f"f{i}": [0.5] for i in range(4)}}  # its 2nd run stalled

    def run_batch(llm, items, setting):
        out = SimpleNamespace(metrics=SpecMetrics(num_generated_tokens=4, num_steps=4), token_ids=[1, 2, 3, 4])
        return [out] * len(items), times[llm.name].pop(0)

    monkeypatch.setattr(m, "run_batch", run_batch)

    def engine(name, config):
        return name, config, SimpleNamespace(name=name, speculator=None, metrics=SimpleNamespace(step_costs=None))

    engines = [engine("baseline", None), *(engine(f"f{i}", {"method": "x"}) for i in range(4))]
    rows = m.measure(engines, Setting(workload=Workload(name="w", items=("a",)), batch_size=1, temperature=0.0,
                                      max_tokens=4), repeats=1, progress=lambda _: None, interleave="batch")
    assert times["baseline"] == [0.9]  # B f f f B f B: three runs of it
    assert all(r["speedup"] == pytest.approx(1.2 / 0.5) for r in rows[1:])  # the median, not the stall (3.0)


def test_step_interleaving_times_each_engine_by_its_own_steps(monkeypatch):
    """Every engine runs the batch at once, a step each in turn; an engine's seconds are its own
    steps' (a clock that only its steps advance), not the wall time the others' steps fill."""
    from types import SimpleNamespace

    from specpath_engine.bench import measure as m
    from specpath_engine.metrics import SpecMetrics

    clock, calls = [0.0], []
    monkeypatch.setattr(m.time, "perf_counter", lambda: clock[0])

    def engine(name, steps, cost):
        def stream(token_lists, params):
            assert len(token_lists) == len(params) == 2 and token_lists[1] == [7, 7]  # the chat, rendered
            requests = [SimpleNamespace(metrics=SpecMetrics(num_generated_tokens=4, num_steps=steps),
                                        output_token_ids=[1, 2, 3, 4]) for _ in token_lists]
            for _ in range(steps):
                calls.append(name)
                clock[0] += cost
                yield requests

        llm = SimpleNamespace(engine=SimpleNamespace(stream=stream), chat_prompts=lambda chat: ["chat"],
                              encode_prompts=lambda texts: [[5] if t == "prompt" else [7, 7] for t in texts])
        return name, None, llm

    engines = [engine("plain", 4, 0.5), engine("fast", 2, 0.75)]
    out = m.run_lockstep(engines, ["prompt", [{"role": "user", "content": "hi"}]],
                         Setting(workload=WORKLOAD, batch_size=2, temperature=0.0, max_tokens=4))
    assert calls == ["plain", "fast", "plain", "fast", "plain", "plain"]
    assert out["plain"][1] == pytest.approx(2.0) and out["fast"][1] == pytest.approx(1.5)
    assert [o.token_ids for o in out["fast"][0]] == [[1, 2, 3, 4]] * 2


def test_step_and_batch_interleaving_generate_the_same_tokens(engines):
    setting = Setting(workload=WORKLOAD, batch_size=2, temperature=0.0, max_tokens=10)
    step, batch = (measure(engines, setting, repeats=1, progress=lambda _: None, interleave=i) for i in ("step", "batch"))
    assert all(r["greedy_identical"] and r["identical_requests"] == 2 for r in step + batch)
    assert [r["num_requests"] for r in step] == [r["num_requests"] for r in batch] == [2, 2]
    with pytest.raises(ValueError, match="interleave"):
        measure(engines, setting, repeats=1, progress=lambda _: None, interleave="prompt")


def test_batched_and_sampled_settings(engines):
    rows = measure(engines, Setting(workload=WORKLOAD, batch_size=3, temperature=0.8, max_tokens=6, seed=5),
                   repeats=1, progress=lambda _: None)
    assert all(r["num_requests"] == 3 and r["greedy_identical"] is None for r in rows)
    assert len(rows[1]["per_batch_speedup"]) == 1


def test_each_round_starts_with_drafters_that_forgot_earlier_responses():
    """Suffix decoding's global tree keeps finished answers; the prompts repeat every round, so a
    second round would draft the first round's answers. Each round forgets them: the last round's
    target passes are those of a one-round run (and half as many where the tree remembers)."""
    workload = Workload(name="tiny4", items=(*WORKLOAD.items, "The weather today", "import os\nimport sys\n"))
    runs = [("baseline", None),  # (a fixed draft length: the passes do not depend on timings)
            ("suffix", {"method": "suffix", "num_speculative_tokens": 8, "draft_length_policy": "fixed"})]
    built, skipped = build_engines(runs, model=None, engine_kwargs={"num_threads": 1}, progress=lambda _: None)
    assert skipped == []
    setting = Setting(workload=workload, batch_size=1, temperature=0.0, max_tokens=48)
    once = measure(built, setting, repeats=1, progress=lambda _: None)[1]["target_passes"]
    assert measure(built, setting, repeats=2, progress=lambda _: None)[1]["target_passes"] == once
    speculator = built[1][2].speculator
    speculator.forget_responses = lambda: None  # what the bench did before
    assert measure(built, setting, repeats=2, progress=lambda _: None)[1]["target_passes"] < 0.75 * once


def _row(method, speedup, passes, config=True, workload="code", temperature=0.0):
    return {"workload": workload, "batch_size": 1, "temperature": temperature, "method": method,
            "config": {"method": method} if config else None, "tokens_per_s": 10 * speedup, "speedup": speedup,
            "speedups": [speedup, speedup], "mean_acceptance_length": passes, "acceptance_rate_by_position": [0.5, 0.25],
            "tokens_per_target_pass": passes, "target_passes": 10, "plausible": speedup <= 1.25 * passes,
            "greedy_identical": True if temperature == 0 else None, "identical_requests": 1, "num_requests": 1,
            "per_batch_speedup": [speedup], "load_per_core": [0.1]}


RESULT = {
    "date": "2026-12-03 06:00 UTC",
    "machine": {"cpu": "AMD EPYC", "cores": 2, "load_at_start": 0.1, "gated": True, "max_load": 0.5},
    "settings": {"model": "embedded", "dtype": "float32", "quantization": None, "threads": 1, "workloads": ["code"],
                 "batch": [1], "temperature": [0.0], "max_tokens": 12, "ignore_eos": True, "repeats": 2},
    "rows": [_row("baseline", 1.0, 1.0, config=False), _row("slow", 0.9, 1.1), _row("fast", 1.5, 1.8),
             _row("impossible", 3.0, 1.2)],
    "skipped": [["eagle", "no drafter for this target"]],
}


def test_tables_sort_fastest_first_and_flag_impossible_rows():
    (key, rows), = report.groups(RESULT["rows"]).items()
    assert [r["method"] for r in rows] == ["baseline", "impossible", "fast", "slow"]
    table = report.text_table(rows)
    assert "3.00x (3.00-3.00) !" in table and "1.50x (1.50-1.50)  " in table
    assert report.fastest(rows) == "fastest: impossible (3.00x)"
    assert report.fastest([RESULT["rows"][0], _row("slow", 0.9, 1.1)]) == "fastest: plain decoding (no method pays here)"


def test_outputs_written(tmp_path):
    written = report.write_outputs(RESULT, tmp_path)
    names = {p.name for p in written}
    assert {"result.json", "report.md", "report.html", "acceptance_by_position.png", "acceptance_by_position.svg",
            "speedup_per_workload.png", "speedup_per_workload.svg"} <= names
    assert (tmp_path / "acceptance_by_position.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (tmp_path / "report.html").read_text()
    assert html.count("<svg") == 2 and "fastest: impossible" in html
    md = (tmp_path / "report.md").read_text()
    assert "### code, batch 1, greedy" in md and "AMD EPYC" in md and "skipped eagle" in md
    assert "Per request" in md
    assert json.loads((tmp_path / "result.json").read_text())["rows"][2]["method"] == "fast"


@pytest.mark.parametrize("argv, says", [
    (["--workload", "nope"], "unknown workload 'nope'"),
    (["--batch", "0"], "--batch must be >= 1"),
    (["--config", "x"], "expected LABEL=JSON"),
    (["--config", "x={"], "--config x: not JSON"),
    (["--methods", "bogus"], "unknown method(s) bogus"),
    (["--workload", "chat"], "no workload this model can run"),
])
def test_bad_arguments_are_one_line(capsys, argv, says):
    assert main(["bench", "--model", "embedded", "--wait", "0", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert says in err and err.startswith("specpath: error:") and "\n" not in err


def test_cli_json(capsys):
    code = main(["bench", "--model", "embedded", "--wait", "0", "--methods", "ngram", "--workload", "code",
                 "--max-tokens", "4", "--repeats", "1", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert {r["method"] for r in result["rows"]} == {"baseline", "ngram"}
    assert result["settings"]["model"] == "embedded" and result["machine"]["gated"] is False
    assert result["settings"]["interleave"] == "step" and "--interleave" not in result["command"]


def test_cli_engines_one_after_another(capsys):
    code = main(["bench", "--model", "embedded", "--wait", "0", "--methods", "ngram", "--workload", "code",
                 "--max-tokens", "4", "--repeats", "1", "--interleave", "batch", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["settings"]["interleave"] == "batch" and result["command"].endswith("--interleave batch")
    assert all(r["greedy_identical"] for r in result["rows"])


def test_the_page_says_how_the_engines_were_interleaved():
    step = {**RESULT, "settings": {**RESULT["settings"], "interleave": "step"}}
    assert "2 rounds, the engines interleaved step by step;" in report.markdown(step)
    assert "2 interleaved rounds;" in report.markdown(RESULT)  # results written before the option


def test_the_page_names_quantised_weights():
    quantised = {**RESULT, "settings": {**RESULT["settings"], "quantization": "int4"}}
    assert "Model embedded (float32, int4 weights)," in report.markdown(quantised)
    assert "Model embedded (float32)," in report.markdown(RESULT)
