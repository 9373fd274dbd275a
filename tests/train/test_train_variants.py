"""``specpath train METHOD --variant`` (PARD, P-EAGLE) and ``--from``: each variant trains on the
embedded tiny target, from scratch and as a fine-tune of the plain drafter, and is served by
``{"model": DIR}`` as the variant it is; runs repeat for a seed; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file

from specpath.cli import main
from specpath_train.methods import NUM_SPECULATIVE_TOKENS, VARIANTS

from test_train_cli import TINY, _embedded, data_file, last_error, train  # noqa: F401 - data_file is a fixture

K = NUM_SPECULATIVE_TOKENS
EXTRA_SLOTS = {"pard": K, "p-eagle": K - 1}
"""The method table's extra draft slots of each variant at K."""


@pytest.fixture(scope="module")
def plain(tmp_path_factory, data_file):  # noqa: F811
    """The plain drafter of each method that has a variant, trained once for the module."""
    root = tmp_path_factory.mktemp("plain")
    runs = {}
    for method in sorted({m for m, _ in VARIANTS}):
        code = main(["train", method, "--out", str(root / method), "--data", str(data_file), *TINY])
        assert code == 0
        runs[method] = root / method
    return runs


def resolved(checkpoint: Path):
    from specpath.config.speculative import SpeculativeConfig
    from specpath.config.model import ModelConfig

    target = ModelConfig(model=_embedded())
    return SpeculativeConfig(model=str(checkpoint), num_speculative_tokens=K, target_model_config=target)


@pytest.mark.parametrize(("method", "variant"), sorted(VARIANTS))
@pytest.mark.parametrize("start", ["scratch", "from"])
def test_each_variant_trains_and_serves_by_inference(capsys, tmp_path, data_file, plain, method, variant, start):  # noqa: F811
    out = tmp_path / variant
    start_from = ["--from", str(plain[method])] if start == "from" else []
    code, stdout, err = train(capsys, method, "--variant", variant, *start_from, "--out", str(out),
                              "--data", str(data_file), *TINY)
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["variant"] == variant and metrics["steps"] == 3
    assert (metrics["from"] is not None) is (start == "from")
    assert metrics["heldout"]["method_inferred"] == method and metrics["heldout"]["tau"] >= 1.0
    assert len(metrics["heldout"]["acceptance_by_position"]) == K and "held-out tau" in stdout
    config = json.loads((out / "config.json").read_text())
    assert config["parallel_drafting"] is True
    # {"model": DIR} alone: the method and the variant come from the checkpoint (evaluation served it so)
    spec = resolved(out)
    assert spec.method == method and spec.parallel_drafting is True
    assert spec.speculator_config.max_num_new_slots_for_drafting == EXTRA_SLOTS[variant]
    assert resolved_chain(out).speculator_config.max_num_new_slots_for_drafting < EXTRA_SLOTS[variant]
    if start == "from":
        log = (out / "run" / "work" / "train.log").read_text()
        assert f"initialised from {plain[method].resolve()}" in log
    code = main(["explain", "--model", _embedded(), "--speculative-config",
                 json.dumps({"model": str(out), "num_speculative_tokens": K})])
    shown, err = capsys.readouterr()
    assert code == 0, err
    assert any(line.lstrip()[:1].isdigit() and "variant" in line and "parallel_drafting: true" in line
               for line in shown.splitlines()), shown
    # specpath export: as for the shipped PARD draft and P-EAGLE head (written / one line, nothing written)
    from specpath_train.export import ExportError, export_checkpoint

    if variant == "pard":
        written = export_checkpoint(out, "vllm", tmp_path / "vllm", target=_embedded())
        assert "model.safetensors" in {p.name for p in written}
    else:
        with pytest.raises(ExportError, match="P-EAGLE") as refused:
            export_checkpoint(out, "vllm", tmp_path / "vllm", target=_embedded())
        assert "\n" not in str(refused.value) and not (tmp_path / "vllm").exists()


def resolved_chain(checkpoint: Path):
    """The same checkpoint with ``parallel_drafting: false``: the user's field wins."""
    from specpath.config.speculative import SpeculativeConfig
    from specpath.config.model import ModelConfig

    return SpeculativeConfig(model=str(checkpoint), num_speculative_tokens=K, parallel_drafting=False,
                             target_model_config=ModelConfig(model=_embedded()))


@pytest.mark.parametrize(("method", "variant"), sorted(VARIANTS))
def test_two_runs_of_a_seed_give_identical_weights(capsys, tmp_path, data_file, plain, method, variant):  # noqa: F811
    runs = []
    for name in ("a", "b"):
        code, _, err = train(capsys, method, "--variant", variant, "--from", str(plain[method]), "--seed", "2",
                             "--out", str(tmp_path / name), "--data", str(data_file), *TINY)
        assert code == 0, err
        runs.append(load_file(str(tmp_path / name / "model.safetensors")))
    assert runs[0].keys() == runs[1].keys()
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    # another variant (none) in the same --out is another config: refused, nothing written over
    before = (tmp_path / "a" / "model.safetensors").read_bytes()
    code, _, err = train(capsys, method, "--from", str(plain[method]), "--seed", "2", "--out", str(tmp_path / "a"),
                         "--data", str(data_file), *TINY, "--resume")
    assert code == 1 and "holds a run of another config (differs in variant)" in last_error(err)
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == before


def test_a_variant_stopped_by_sigterm_resumes_to_the_same_weights(capsys, tmp_path, data_file, plain, monkeypatch):  # noqa: F811
    import os
    import signal

    from specpath_train import trainer

    argv = ["draft_model", "--variant", "pard", "--from", str(plain["draft_model"]), "--data", str(data_file), *TINY]
    code, _, err = train(capsys, *argv, "--out", str(tmp_path / "straight"))
    assert code == 0, err
    real, calls = trainer.warmup_cosine, []

    def interrupting(step, *a, **kw):
        calls.append(step)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(step, *a, **kw)

    monkeypatch.setattr(trainer, "warmup_cosine", interrupting)
    code, _, err = train(capsys, *argv, "--out", str(tmp_path / "cut"))
    assert code == 1 and "stopped by SIGTERM at step 2" in last_error(err) and "--resume" in last_error(err)
    monkeypatch.setattr(trainer, "warmup_cosine", real)
    code, _, err = train(capsys, *argv, "--out", str(tmp_path / "cut"), "--resume")
    assert code == 0, err
    straight, resumed = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("straight", "cut"))
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)


def test_a_head_from_elsewhere_keeps_its_draft_vocabulary(capsys, tmp_path, data_file):  # noqa: F811
    """``--from`` a head of another draft vocabulary (a published head's, say): its size wins over
    the method's default (the rows and maps are loaded from it)."""
    from specpath_drafting.testing import random_head
    from specpath_eagle3.head import Eagle3Head
    from specpath_engine.model import LlamaModel

    head = random_head(Eagle3Head, LlamaModel.from_pretrained(_embedded()), tmp_path / "eagle3-head", seed=1,
                       draft_vocab_size=64)
    out = tmp_path / "p-eagle"
    code, _, err = train(capsys, "eagle3", "--variant", "p-eagle", "--from", str(head), "--out", str(out),
                         "--data", str(data_file), *TINY)
    assert code == 0, err
    assert json.loads((out / "config.json").read_text())["draft_vocab_size"] == 64
    assert "--draft-vocab 64" in (out / "run" / "train.log").read_text()


def test_draft_vocab_with_from_chooses_the_vocabulary_again_from_the_data(capsys, tmp_path, data_file):  # noqa: F811
    """``--draft-vocab N --from HEAD``: the head's vocabulary is chosen again, the data's N most
    frequent tokens (a head chosen on other text misses tokens this text needs)."""
    from specpath_drafting.testing import random_head
    from specpath_eagle3.head import Eagle3Head
    from specpath_engine.model import LlamaModel

    head = random_head(Eagle3Head, LlamaModel.from_pretrained(_embedded()), tmp_path / "eagle3-head", seed=1,
                       draft_vocab_size=64)
    out = tmp_path / "regrown"
    code, _, err = train(capsys, "eagle3", "--from", str(head), "--draft-vocab", "96", "--out", str(out),
                         "--data", str(data_file), *TINY)
    assert code == 0, err
    assert json.loads((out / "config.json").read_text())["draft_vocab_size"] == 96
    log = (out / "run" / "train.log").read_text()
    assert "--draft-vocab 96" in log and "--revocab" in log
    assert "ids keep the --init head's rows" in (out / "run" / "work" / "train.log").read_text()
    assert json.loads((out / "run" / "run.json").read_text())["draft_vocab"] == 96
    d2t = load_file(str(out / "model.safetensors"))["d2t"]
    ids = torch.arange(96) + d2t.long()
    assert bool((ids.diff() > 0).all())  # a strictly increasing map: 96 distinct target ids


@given(old=st.sets(st.integers(0, 199), min_size=1, max_size=60), new=st.sets(st.integers(0, 199), min_size=1, max_size=60))
@settings(max_examples=40, deadline=None)
def test_revocab_keeps_the_rows_of_ids_the_head_had(old, new):
    from specpath_train.recipes.eagle3 import revocab

    old_ids, new_ids = torch.tensor(sorted(old)), torch.tensor(sorted(new))
    start = {"d2t": old_ids - torch.arange(len(old_ids)), "t2d": torch.zeros(200, dtype=torch.bool),
             "lm_head.weight": old_ids[:, None].float() * torch.ones(1, 3), "fc.weight": torch.ones(2)}
    fresh = -new_ids[:, None].float() * torch.ones(1, 3) - 1  # [V', 3] the target's rows, told apart by sign
    kept = revocab(start, new_ids, fresh)
    assert kept == len(old & new) and "d2t" not in start and "t2d" not in start and "fc.weight" in start
    rows = start["lm_head.weight"]
    for i, t in enumerate(new_ids.tolist()):
        assert rows[i, 0].item() == (t if t in old else -t - 1)
    whole = {"lm_head.weight": torch.arange(200)[:, None].float() * torch.ones(1, 3)}  # no map: row i is id i
    assert revocab(whole, new_ids, fresh) == len(new_ids)
    assert whole["lm_head.weight"][:, 0].tolist() == new_ids.float().tolist()


def test_bad_variants_and_starts_are_one_line_and_write_nothing(capsys, tmp_path, data_file, plain):  # noqa: F811
    out = tmp_path / "out"
    not_a_checkpoint = tmp_path / "empty"
    not_a_checkpoint.mkdir()
    cases = [
        (["mtp", "--variant", "pard"], "method 'mtp' has no variants; specpath train has draft_model --variant pard"),
        (["eagle3", "--variant", "peagle"], "eagle3's variants are p-eagle (did you mean 'p-eagle'?)"),
        (["draft_model", "--variant", "p-eagle"], "draft_model's variants are pard"),
        (["eagle", "--from", str(plain["eagle3"])],
         "eagle's recipe cannot start from a checkpoint (eagle3, mtp, dflash, dspark, draft_model can)"),
        (["dflash", "--from", str(plain["eagle3"])], "a checkpoint of eagle3, not dflash"),
        (["mtp", "--from", str(plain["eagle3"])], "a checkpoint of eagle3, not mtp"),
        (["eagle3", "--from", str(tmp_path / "nothing")], "not a drafter checkpoint"),
        (["eagle3", "--from", str(not_a_checkpoint)], "not a drafter checkpoint"),
        (["draft_model", "--variant", "pard", "--from", str(plain["eagle3"])],
         "a checkpoint of eagle3, not draft_model"),
        (["eagle3", "--variant", "p-eagle", "--from", str(plain["draft_model"])],
         "a checkpoint of draft_model, not eagle3"),
    ]
    for argv, expected in cases:
        code, _, err = train(capsys, *argv, "--out", str(out), "--data", str(data_file), *TINY)
        assert code == 1 and expected in last_error(err), (argv, err)
    assert not out.exists()
    # a checkpoint of the method made for another shape of target
    other = tmp_path / "other"
    other.mkdir()
    config = json.loads((plain["eagle3"] / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "target_hidden_size": 64}))
    (other / "model.safetensors").write_bytes((plain["eagle3"] / "model.safetensors").read_bytes())
    code, _, err = train(capsys, "eagle3", "--variant", "p-eagle", "--from", str(other), "--out", str(out),
                         "--data", str(data_file), *TINY)
    assert code == 1 and "does not fit the target: target hidden size 64 where the target needs 192" in last_error(err)
    (other / "config.json").write_text(json.dumps({**config, "eagle_aux_hidden_state_layer_ids": [1, 2, 3]}))
    code, _, err = train(capsys, "eagle3", "--from", str(other), "--out", str(out), "--data", str(data_file), *TINY)
    assert code == 1 and "taps [1, 2, 3] where the target needs [2, 3, 5]" in last_error(err)
    # --from inside the --out this run writes
    code, _, err = train(capsys, "eagle3", "--from", str(plain["eagle3"]), "--out", str(plain["eagle3"].parent),
                         "--data", str(data_file), *TINY, "--overwrite")
    assert code == 1 and "inside --out" in last_error(err)
    assert (plain["eagle3"] / "model.safetensors").is_file() and not out.exists()


@settings(max_examples=60, deadline=None)
@given(seen=st.sets(st.integers(0, 31), max_size=32), specials=st.sets(st.integers(0, 31), max_size=8),
       reserved=st.sets(st.integers(0, 31), max_size=3))
def test_the_pard_token_is_never_in_the_text_and_prefers_a_special_token(tmp_path_factory, seen, specials, reserved):
    from specpath_train.recipes.draft_model_shared import choose_pard_token

    target = tmp_path_factory.mktemp("t")
    (target / "tokenizer.json").write_text(json.dumps(
        {"added_tokens": [{"id": i, "content": f"<s{i}>", "special": True} for i in sorted(specials)]}))
    tokens = torch.tensor(sorted(seen) or [0])[None]
    taken = set(tokens.flatten().tolist()) | reserved
    free = set(range(32)) - taken
    if not free:
        with pytest.raises(ValueError, match="every id"):
            choose_pard_token(target, tokens, 32, tuple(reserved))
        return
    chosen = choose_pard_token(target, tokens, 32, tuple(reserved))
    assert chosen in free
    assert chosen == max(free & specials) if free & specials else chosen == max(free)


def test_mtp_fine_tunes_from_an_mtp_checkpoint_and_refuses_another_shape(capsys, tmp_path, data_file):  # noqa: F811
    first = tmp_path / "mtp"
    code, _, err = train(capsys, "mtp", "--out", str(first), "--data", str(data_file), *TINY)
    assert code == 0, err
    out = tmp_path / "mtp-more"
    code, _, err = train(capsys, "mtp", "--from", str(first), "--out", str(out), "--data", str(data_file), *TINY)
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["from"].startswith(str(first.resolve())) and metrics["steps"] == 3
    assert f"initialised from {first.resolve()}" in (out / "run" / "work" / "train.log").read_text()
    record = json.loads((out / "config.json").read_text())["specpath_training"]
    assert record["init"] == json.loads((first / "config.json").read_text())["specpath_training"]
    # the starting weights moved, from the first run's
    before, after = load_file(str(first / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert before.keys() == after.keys() and any(not torch.equal(before[k], after[k]) for k in before)
    other = tmp_path / "other"
    other.mkdir()
    config = json.loads((first / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "num_nextn_predict_layers": 2, "n_predict": 2}))
    (other / "model.safetensors").write_bytes((first / "model.safetensors").read_bytes())
    bad = tmp_path / "bad"
    code, _, err = train(capsys, "mtp", "--from", str(other), "--out", str(bad), "--data", str(data_file), *TINY)
    assert code == 1 and "module count 2 where the target needs 1" in last_error(err), err
    assert not bad.exists()


def test_more_data_trains_on_an_earlier_runs_windows_and_checks_them(capsys, tmp_path, data_file):  # noqa: F811
    first = tmp_path / "first"
    code, _, err = train(capsys, "mtp", "--out", str(first), "--data", str(data_file), "--data-only", *TINY)
    assert code == 0, err
    earlier = first / "run" / "data"
    out = tmp_path / "more"
    code, _, err = train(capsys, "mtp", "--out", str(out), "--data", str(data_file), "--seed", "1",
                         "--more-data", str(earlier), *TINY)
    assert code == 0, err
    own = json.loads((out / "run" / "data" / "features.json").read_text())
    merged = json.loads((out / "run" / "data-more" / "features.json").read_text())
    mine, theirs = merged["parts"]
    # this run's held-out windows stay held out; the earlier run's training windows join training
    assert merged["heldout"] == own["heldout"] == mine["heldout"]
    assert mine["path"] == str((out / "run" / "data").resolve()) and theirs["path"] == str(earlier.resolve())
    tokens = load_file(str(out / "run" / "data-more" / "features.safetensors"))["tokens"]
    assert tokens.shape[0] == mine["windows"] + theirs["windows"] - theirs["heldout"]
    train_log = (out / "run" / "train.log").read_text()
    assert "with --more-data" in train_log and "data-more" in train_log
    assert json.loads((out / "run" / "run.json").read_text())["more_data"] == [str(earlier.resolve())]
    # bad --more-data: one line, nothing written
    for bad_dir, message in ((tmp_path / "nowhere", "not a finished data directory"),
                             (first, "the data of a run is its DIR/run/data")):
        bad = tmp_path / "bad"
        code, _, err = train(capsys, "mtp", "--out", str(bad), "--data", str(data_file), "--more-data", str(bad_dir),
                             *TINY)
        assert code == 1 and message in last_error(err), err
        assert not bad.exists()
    code, _, err = train(capsys, "mtp", "--out", str(tmp_path / "bad"), "--data", str(data_file), "--data-only",
                         "--more-data", str(earlier), *TINY)
    assert code == 1 and "--more-data with --data-only" in last_error(err), err
    meta = json.loads((earlier / "features.json").read_text())
    other = tmp_path / "other"
    other.mkdir()
    (other / "features.safetensors").write_bytes((earlier / "features.safetensors").read_bytes())
    (other / "features.json").write_text(json.dumps({**meta, "key": {**meta["key"], "target": "0" * 16}}))
    code, _, err = train(capsys, "mtp", "--out", str(tmp_path / "bad"), "--data", str(data_file),
                         "--more-data", str(other), *TINY)
    assert code == 1 and "made with other target weights" in last_error(err), err
    assert not (tmp_path / "bad").exists()


def test_a_data_only_run_trains_from_a_checkpoint_on_resume_and_then_keeps_it(capsys, tmp_path, data_file):  # noqa: F811
    """The data of a ``--data-only`` run serves any starting drafter: ``--resume --from`` trains
    on it; once training has begun the start is part of the run (another ``--from`` is refused)."""
    start = tmp_path / "start"
    code, _, err = train(capsys, "mtp", "--out", str(start), "--data", str(data_file), *TINY)
    assert code == 0, err
    run = tmp_path / "run"
    code, _, err = train(capsys, "mtp", "--out", str(run), "--data", str(data_file), "--data-only", *TINY)
    assert code == 0, err
    code, _, err = train(capsys, "mtp", "--out", str(run), "--data", str(data_file), "--resume", "--from", str(start),
                         *TINY)
    assert code == 0, err
    assert f"initialised from {start.resolve()}" in (run / "run" / "work" / "train.log").read_text()
    assert json.loads((run / "run" / "run.json").read_text())["from"].startswith(str(start.resolve()))
    code, _, err = train(capsys, "mtp", "--out", str(run), "--data", str(data_file), "--resume", *TINY)
    assert code == 1 and "differs in from" in last_error(err), err


@pytest.mark.parametrize("method", ["dflash", "dspark"])
def test_a_block_drafter_fine_tunes_from_its_checkpoint_with_its_taps(capsys, tmp_path, data_file, method):  # noqa: F811
    """``--from`` a DFlash/DSpark checkpoint: the run keeps the starting drafter's layout (its
    taps, not the method's default ones, are the features it computes), its weights move, the
    lineage is recorded; a checkpoint of the other block method or of another layout is one line."""
    from safetensors.torch import save_file

    first = tmp_path / "first"
    code, _, err = train(capsys, method, "--out", str(first), "--data", str(data_file), *TINY)
    assert code == 0, err
    # the same drafter reading other target layers (as the shipped SmolLM2 ones do: EAGLE-3's taps)
    moved = tmp_path / "moved"
    moved.mkdir()
    config = json.loads((first / "config.json").read_text())
    taps = [t + 1 for t in config["target_layer_ids"]]
    (moved / "config.json").write_text(json.dumps({**config, "target_layer_ids": taps}))
    save_file(load_file(str(first / "model.safetensors")), str(moved / "model.safetensors"))
    out = tmp_path / "more"
    code, _, err = train(capsys, method, "--from", str(moved), "--out", str(out), "--data", str(data_file), *TINY)
    assert code == 0, err
    layers = json.loads((out / "run" / "data" / "features.json").read_text())["key"]["layers"]
    assert layers[:-1] == taps
    assert json.loads((out / "config.json").read_text())["target_layer_ids"] == taps
    assert f"{method}: initialised from {moved.resolve()}" in (out / "run" / "work" / "train.log").read_text()
    record = json.loads((out / "config.json").read_text())["specpath_training"]
    assert record["init"] == config["specpath_training"]
    before, after = load_file(str(moved / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert before.keys() == after.keys() and any(not torch.equal(before[k], after[k]) for k in before)
    other = "dspark" if method == "dflash" else "dflash"
    code, _, err = train(capsys, other, "--from", str(first), "--out", str(tmp_path / "bad"), "--data",
                         str(data_file), *TINY)
    assert code == 1 and f"a checkpoint of {method}, not {other}" in last_error(err), err
    (moved / "config.json").write_text(json.dumps({**config, "target_layer_ids": [0, 99, 1]}))
    code, _, err = train(capsys, method, "--from", str(moved), "--out", str(tmp_path / "bad"), "--data",
                         str(data_file), *TINY)
    assert code == 1 and "does not fit the target: target layers [0, 99, 1]" in last_error(err), err
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("method", ["dflash", "dspark"])
def test_draft_layers_grows_a_block_drafter_that_then_serves(capsys, tmp_path, data_file, method):  # noqa: F811
    """--draft-layers 2 --from a one-layer drafter: a two-layer checkpoint (grown: the recipe's
    test shows it drafts as the one-layer one did before training), served as the method it is;
    fewer layers than the checkpoint is one line and writes nothing."""
    one, two = tmp_path / "one", tmp_path / "two"
    code, _, err = train(capsys, method, "--out", str(one), "--data", str(data_file), *TINY)
    assert code == 0, err
    code, stdout, err = train(capsys, method, "--from", str(one), "--draft-layers", "2", "--out", str(two),
                              "--data", str(data_file), *TINY)
    assert code == 0, err
    config = json.loads((two / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and config["model_type"] == method
    assert "grown from 1 to 2 layers" in (two / "run" / "work" / "train.log").read_text()
    assert json.loads((two / "run" / "run.json").read_text())["draft_layers"] == 2
    assert resolved(two).method == method
    code, _, err = train(capsys, method, "--from", str(two), "--draft-layers", "1", "--out", str(tmp_path / "three"),
                         "--data", str(data_file), *TINY)
    assert code == 1 and "the --from drafter has 2 layers; a run may add layers, not drop them" in last_error(err)
    assert not (tmp_path / "three").exists()
