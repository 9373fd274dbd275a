"""``specpath train --corpus``: the wide corpus drawn once into the run (the target's own
requests never written again on --resume), its place in the run's config, the fallback of a
target without a chat template, and ``--write-prompts``; on the embedded target and a tiny GGUF,
with a scripted model standing in for the one that writes the requests."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from specpath.cli import main
from specpath_train import cli_train
from specpath_train.prompts import builtin_prompts, read_prompts

TINY = ["--steps", "3", "--max-new-tokens", "24", "--window", "32", "--batch", "4", "--eval-prompts", "1",
        "--eval-tokens", "12", "--no-progress"]
FALLBACK = "wide corpus: the target has no chat template that opens a user turn, so no self-instructed requests"


def train(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["train", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def last_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("specpath train: error:")]
    assert len(lines) == 1, err
    return lines[0]


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class ScriptedLLM:
    """Writes request number i for the i-th prompt it is given, ending each as a user turn ends."""

    def __init__(self) -> None:
        self.asked = 0

    def generate(self, prompts, params):
        out = []
        for _ in prompts:
            out.append(SimpleNamespace(text=f"Please explain idea number {self.asked} to me.", finish_reason="stop"))
            self.asked += 1
        return out


@pytest.fixture
def llms(monkeypatch) -> list[ScriptedLLM]:
    """Every model :func:`cli_train.generation_llm` loaded in the test, in order."""
    made: list[ScriptedLLM] = []

    def load(target_dir, args):
        made.append(ScriptedLLM())
        return made[-1]

    monkeypatch.setattr(cli_train, "generation_llm", load)
    return made


@pytest.fixture(scope="module")
def gguf_target(tmp_path_factory) -> Path:
    """A tiny qwen3 GGUF file with a BPE vocabulary and a ChatML template."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import gguf_helpers

    path = tmp_path_factory.mktemp("gguf") / "tiny-qwen3.gguf"
    gguf_helpers.write_tiny_gguf(path, arch="qwen3")
    return path


def test_a_wide_run_draws_its_prompts_once_and_a_resumed_run_never_writes_them_again(capsys, tmp_path, gguf_target,
                                                                                     llms, monkeypatch):
    from specpath_train import selfdistill

    out = tmp_path / "wide"
    argv = ["dflash", "--target", str(gguf_target), "--out", str(out), "--corpus", "wide", "--prompts", "22", *TINY]
    real = selfdistill.generate_split

    def stop_before_answering(*a, **kw):
        assert (out / "run" / "prompts-train.jsonl").is_file()  # saved before any response is generated
        raise KeyboardInterrupt

    monkeypatch.setattr(selfdistill, "generate_split", stop_before_answering)
    code, _, err = train(capsys, *argv)
    assert code == 1 and "--resume" in last_error(err) and len(llms) == 1
    train_rows, held_rows = rows(out / "run" / "prompts-train.jsonl"), rows(out / "run" / "prompts-heldout.jsonl")
    assert (len(train_rows), len(held_rows)) == (22, 2)  # 2: a tenth of all, as the built-in corpus holds out
    selfs = [r for r in train_rows + held_rows if "idea number" in json.dumps(r)]
    assert len(selfs) == 8 + 1  # 16/44 of 22, and the larger share of the 2 held out
    assert any(r["messages"][0]["role"] == "system" for r in selfs)  # a steering system message is kept
    assert json.loads((out / "run" / "run.json").read_text())["corpus"] == "wide"
    assert list((out / "run" / "self-instruct").glob("self-0-*.json"))  # the target's requests, kept as written

    monkeypatch.setattr(selfdistill, "generate_split", real)
    code, _, err = train(capsys, *argv, "--resume")
    assert code == 0, err
    assert len(llms) == 1  # the target was not asked again
    assert rows(out / "run" / "prompts-train.jsonl") == train_rows
    assert "wide corpus: the prompts drawn before" in (out / "run" / "train.log").read_text()
    assert "from the wide corpus" in err

    # --write-prompts with the same flags writes the same prompts, training then held-out
    file = tmp_path / "wide.jsonl"
    code, shown, err = train(capsys, "--target", str(gguf_target), "--corpus", "wide", "--prompts", "22",
                             "--write-prompts", str(file))
    assert code == 0, err
    assert rows(file) == train_rows + held_rows and len(read_prompts(file)) == 24
    assert "22 training + 2 held-out prompts of the wide corpus" in shown


def test_write_prompts_of_the_wide_write_corpus_add_code_writing_requests(capsys, tmp_path, gguf_target, llms):
    from specpath_train import prompt_mix

    wide, write = tmp_path / "wide.jsonl", tmp_path / "write.jsonl"
    for corpus, file in (("wide", wide), ("wide-write", write)):
        code, shown, err = train(capsys, "--target", str(gguf_target), "--corpus", corpus, "--prompts", "45",
                                 "--seed", "3", "--write-prompts", str(file))
        assert code == 0, err
        assert f"45 training + 5 held-out prompts of the {corpus} corpus" in shown
    asked = {r["messages"][-1]["content"] for r in rows(write) if "messages" in r}
    # 6/50 of the 45 training prompts (seed 3 + 6) and none in the wide set
    assert set(prompt_mix.write_requests("train", 5, seed=3 + 6)) <= asked
    assert not {r["messages"][-1]["content"] for r in rows(wide) if "messages" in r} & \
        set(prompt_mix.write_requests("train", 5, seed=3 + 6))


def test_a_target_without_a_chat_template_gets_the_other_kinds_and_says_so_once(capsys, tmp_path, llms):
    out = tmp_path / "wide"
    code, _, err = train(capsys, "eagle", "--target", "embedded", "--out", str(out), "--corpus", "wide",
                         "--prompts", "12", *TINY)
    assert code == 0, err
    assert not llms  # the target was never loaded to write requests
    log = (out / "run" / "train.log").read_text()
    assert log.count(FALLBACK) == 1
    train_rows = rows(out / "run" / "prompts-train.jsonl")
    assert len(train_rows) == 12 and not any(m["role"] == "system" for r in train_rows for m in r.get("messages", []))
    assert sum("prompt" in r for r in train_rows) == 5  # code 7 + headers 5 of 28ths: 3 + 2 (largest remainders)
    # a run of another corpus in the same directory is refused in one line, whatever else is asked
    for corpus in (["--corpus", "builtin"], []):
        code, _, err = train(capsys, "eagle", "--target", "embedded", "--out", str(out), "--prompts", "12", *TINY,
                             *corpus, "--resume")
        assert code == 1 and "holds a run of another config (differs in corpus)" in last_error(err)


def test_a_builtin_run_records_its_corpus_and_a_run_made_before_corpus_existed_still_resumes(capsys, tmp_path):
    out = tmp_path / "builtin"
    argv = ["dflash", "--target", "embedded", "--out", str(out), "--prompts", "12", *TINY]
    code, _, err = train(capsys, *argv)
    assert code == 0, err
    run_json = out / "run" / "run.json"
    config = json.loads(run_json.read_text())
    assert config["corpus"] == "builtin" and not (out / "run" / "prompts-train.jsonl").exists()
    del config["corpus"]  # as an older specpath wrote it
    run_json.write_text(json.dumps(config))
    code, _, err = train(capsys, *argv, "--corpus", "builtin", "--resume", "--steps", "4")
    assert code == 0, err
    code, _, err = train(capsys, *argv, "--corpus", "wide", "--resume", "--steps", "4")
    assert code == 1 and "differs in corpus" in last_error(err)


def test_write_prompts_of_the_builtin_corpus(capsys, tmp_path):
    file = tmp_path / "builtin.jsonl"
    code, shown, err = train(capsys, "--target", "embedded", "--prompts", "9", "--seed", "4", "--write-prompts", str(file))
    assert code == 0, err
    expected = builtin_prompts("train", 9, seed=4) + builtin_prompts("heldout", 1, seed=11)
    assert read_prompts(file) == expected and "9 training + 1 held-out prompts of the builtin corpus" in shown


@pytest.mark.parametrize(("argv", "expected"), [
    (["eagle3", "--corpus", "wide", "--data", "DATA", "--out", "OUT"], "--corpus wide with --data: --data is the prompts"),
    (["eagle3", "--corpus", "builtin", "--data", "DATA", "--out", "OUT"], "--corpus builtin with --data"),
    (["--data", "DATA", "--write-prompts", "OUT"], "--write-prompts with --data"),
    (["--write-prompts", "NOWHERE/p.jsonl"], "--write-prompts"),
    (["eagle3", "--corpus", "wide"], "give METHOD and --out DIR (or --write-prompts FILE"),
    (["--out", "OUT"], "give METHOD and --out DIR"),
    (["eagle3", "--out", "OUT", "--corpus", "wide", "--prompts", "0"], "--prompts must be at least 1"),
])
def test_bad_corpus_flags_are_one_line_and_write_nothing(capsys, tmp_path, argv, expected):
    data = tmp_path / "data.jsonl"
    data.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    subst = {"DATA": str(data), "OUT": str(tmp_path / "out"), "NOWHERE/p.jsonl": str(tmp_path / "nowhere" / "p.jsonl")}
    code, _, err = train(capsys, *[subst.get(a, a) for a in argv], "--target", "embedded", "--steps", "1")
    assert code == 1 and expected in last_error(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl"]
