"""``specpath export``: every shipped drafter either exports and loads back in specpath with the
same drafts, or is refused in one line naming what the engine lacks; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from specpath.cli import main as cli_main
from specpath_drafting.heads import HeadConfig, read_head_config
from specpath_drafting.published_heads import LAYER_PREFIXES, LAYER_TENSORS, TOP_TENSORS, published_name, specpath_name
from specpath_train.export import FORMATS, ExportError, export_checkpoint

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.parent for p in ROOT.glob("builtin_methods/*/specpath_*/*/*/config.json")
                 if p.parent.parent.name in ("heads", "checkpoints"))
EMBEDDED = str(ROOT / "engine" / "specpath_engine" / "assets" / "default_model")


def _target(ckpt: Path) -> str:
    return "smollm2-135m" if "smollm2" in ckpt.name else EMBEDDED


def _kind(ckpt: Path) -> str:
    return ckpt.parents[1].name.removeprefix("specpath_")


EXPECTED = {  # kind -> formats that write (others refuse); P-EAGLE and the BPE draft refuse everywhere
    "eagle3": set(FORMATS), "draft_model": {"vllm", "sglang"},
    "eagle": set(), "mtp": set(), "dflash": set(), "dspark": set(),
}
REFUSAL_WORDS = {"eagle": "fc bias", "mtp": "MTP module type", "dflash": "q_norm/k_norm", "dspark": "q_norm/k_norm"}


def test_every_method_has_a_shipped_checkpoint_here():
    assert {_kind(p) for p in SHIPPED} == set(EXPECTED)
    assert len(SHIPPED) >= 15


@pytest.mark.parametrize("ckpt", [p for p in SHIPPED if "smollm2" not in p.name], ids=lambda p: p.name)
@pytest.mark.parametrize("fmt", FORMATS)
def test_export_writes_or_refuses_in_one_line(ckpt, fmt, tmp_path):
    kind = _kind(ckpt)
    writes = fmt in EXPECTED[kind] and ckpt.name not in ("peagle-byte-llama", "bpe")
    if not writes:
        with pytest.raises(ExportError) as err:
            export_checkpoint(ckpt, fmt, tmp_path / "out", target=_target(ckpt))
        text = str(err.value)
        assert "\n" not in text and len(text) < 400
        assert REFUSAL_WORDS.get(kind, "") in text
        assert not (tmp_path / "out").exists()  # nothing written
        return
    written = export_checkpoint(ckpt, fmt, tmp_path / "out", target=_target(ckpt))
    assert {p.name for p in written} >= {"config.json", "model.safetensors"}
    _assert_loads_back_the_same(ckpt, tmp_path / "out", kind)


def _assert_loads_back_the_same(ckpt: Path, out: Path, kind: str) -> None:
    """Same architecture and bit-equal weights once loaded by specpath's own loaders."""
    if kind == "eagle3":
        from specpath_drafting.heads import load_head_weights
        from specpath_eagle3.head import Eagle3Head

        original, exported = read_head_config(ckpt, "eagle3"), read_head_config(out, "eagle3")
        assert exported == original
        a = load_head_weights(Eagle3Head(original), ckpt).state_dict()
        b = load_head_weights(Eagle3Head(exported), out).state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        config = json.loads((out / "config.json").read_text())
        layer = config.get("transformer_layer_config", config)
        assert layer["num_hidden_layers"] == 1 and config["norm_before_residual"] is False
    else:
        from specpath_engine.modeling.checkpoint import load_state_dict

        a, b = load_state_dict(ckpt), load_state_dict(out)
        shared = json.loads((ckpt / "config.json").read_text()).get("shares_target_embeddings")
        assert set(b) - set(a) == ({"model.embed_tokens.weight"} if shared else set())
        assert all(torch.equal(a[k], b[k]) for k in a)


def _drafts(target: str | None, spec: dict, prompts: list[list[int]], max_tokens: int):
    from specpath_engine.llm import LLM, SamplingParams

    # K every step: the drafts themselves are compared (the measured policy's back-off follows timings)
    llm = LLM(target, {"draft_length_policy": "fixed", **spec}, dtype="float32", max_model_len=512, max_num_seqs=1)
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    outs = [llm.generate([p], params)[0] for p in prompts]
    return ([list(o.token_ids) for o in outs], [o.metrics.num_draft_tokens for o in outs],
            [list(o.metrics.accepted_by_position) for o in outs])


@pytest.mark.parametrize("name,fmt,method", [
    ("eagle3-byte-llama", "vllm", None), ("eagle3-byte-llama", "sglang", None),
    ("eagle3-byte-llama", "speculators", None), ("ar", "vllm", "draft_model"), ("pard", "sglang", "draft_model"),
])
def test_export_drafts_exactly_as_the_original_on_the_embedded_target(name, fmt, method, tmp_path):
    ckpt = next(p for p in SHIPPED if p.name == name)
    export_checkpoint(ckpt, fmt, tmp_path / "out", target=EMBEDDED)
    prompts = [list(b"def fibonacci(n):\n"), list(b"The capital of France is")]
    base = {"num_speculative_tokens": 4, **({"method": method} if method else {})}  # EAGLE-3: inferred from config
    original = _drafts(None, {**base, "model": str(ckpt)}, prompts, 24)
    exported = _drafts(None, {**base, "model": str(tmp_path / "out")}, prompts, 24)
    assert exported == original
    assert sum(sum(a) for a in original[2]) > 0  # the drafts were accepted at all: a real comparison


@pytest.fixture(scope="module")
def smollm2_exports(tmp_path_factory):
    out = tmp_path_factory.mktemp("smollm2")
    eagle3 = next(p for p in SHIPPED if p.name == "eagle3-smollm2")
    shared = next(p for p in SHIPPED if p.name == "smollm2-shared")
    for fmt in FORMATS:
        export_checkpoint(eagle3, fmt, out / f"eagle3-{fmt}", target="smollm2-135m")
    export_checkpoint(shared, "vllm", out / "draft-vllm", target="smollm2-135m")
    return out


@pytest.mark.parametrize("ckpt", [p for p in SHIPPED if "smollm2" in p.name], ids=lambda p: p.name)
def test_smollm2_drafters_export_or_refuse(ckpt, smollm2_exports, tmp_path):
    kind = _kind(ckpt)
    if kind == "eagle3":
        for fmt in FORMATS:
            _assert_loads_back_the_same(ckpt, smollm2_exports / f"eagle3-{fmt}", kind)
        config = json.loads((smollm2_exports / "eagle3-vllm" / "config.json").read_text())
        assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 15, 27]  # as the issue measured
        assert config["architectures"] == ["LlamaForCausalLMEagle3"]
        verifier = json.loads((smollm2_exports / "eagle3-speculators" / "config.json").read_text())
        assert verifier["speculators_config"]["verifier"]["architectures"] == ["LlamaForCausalLM"]
        assert verifier["speculators_config"]["proposal_methods"][0]["speculative_tokens"] == 4
    elif kind == "draft_model":
        _assert_loads_back_the_same(ckpt, smollm2_exports / "draft-vllm", kind)
        config = json.loads((smollm2_exports / "draft-vllm" / "config.json").read_text())
        assert "shares_target_embeddings" not in config and config["pard_token"] == 16
    else:
        with pytest.raises(ExportError, match=REFUSAL_WORDS[kind]):
            export_checkpoint(ckpt, "vllm", tmp_path / "out", target="smollm2-135m")


def test_smollm2_exports_draft_as_the_originals(smollm2_exports):
    """The SmolLM2 EAGLE-3 head and draft model, exported: the same tokens, drafts and
    acceptances on SmolLM2 as the shipped checkpoints (8 tokens, one prompt: the suite's budget)."""
    ckpts = {p.name: p for p in SHIPPED}
    prompts = [[1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 7018]]
    for original, exported, method in ((ckpts["eagle3-smollm2"], smollm2_exports / "eagle3-speculators", "eagle3"),
                                       (ckpts["smollm2-shared"], smollm2_exports / "draft-vllm", "draft_model")):
        spec = {"method": method, "num_speculative_tokens": 4}
        assert (_drafts("smollm2-135m", {**spec, "model": str(exported)}, prompts, 8)
                == _drafts("smollm2-135m", {**spec, "model": str(original)}, prompts, 8))


@given(name=st.sampled_from(sorted(LAYER_TENSORS) + list(TOP_TENSORS)), prefix=st.sampled_from(LAYER_PREFIXES),
       model=st.booleans())
def test_published_names_read_back(name, prefix, model):
    published = published_name(name, prefix)
    assert specpath_name(("model." if model else "") + published) == name


def test_published_names_are_one_to_one():
    for prefix in LAYER_PREFIXES:
        names = [published_name(n, prefix) for n in [*LAYER_TENSORS, *TOP_TENSORS]]
        assert len(set(names)) == len(names)
    assert specpath_name("model.embed_tokens.weight") is None  # the target lends it
    assert specpath_name("midlayer.unknown.weight") == "midlayer.unknown.weight"  # reported by the loader


def test_published_fixture_configs_parse_as_specpath_heads():
    fixtures = ROOT / "tests" / "fixtures" / "checkpoints"
    spec = HeadConfig.from_dict(json.loads((fixtures / "speculators/Llama-3.1-8B-Instruct-speculator.eagle3/config.json").read_text()))
    assert (spec.kind, spec.hidden_size, spec.draft_vocab_size, spec.num_taps) == ("eagle3", 4096, 32000, 3)
    forge = HeadConfig.from_dict(json.loads((fixtures / "eagle3/specforge-deepseek-eagle3-nested-ids/config.json").read_text()))
    assert forge.kind == "eagle3" and forge.aux_layer_ids == (1, 29, 57)
    with pytest.raises(ValueError, match="norm_before_residual"):
        HeadConfig.from_dict({**json.loads((fixtures / "speculators/Llama-3.1-8B-Instruct-speculator.eagle3/config.json").read_text()),
                              "norm_before_residual": True})


# -- bad input: one line each, nothing overwritten ---------------------------------------------


def _cli(capsys, *argv) -> tuple[int, str]:
    code = cli_main(["export", *map(str, argv)])
    err = capsys.readouterr().err
    return code, err


def test_bad_input_is_one_line(tmp_path, capsys):
    eagle3 = next(p for p in SHIPPED if p.name == "eagle3-byte-llama")
    shared = next(p for p in SHIPPED if p.name == "smollm2-shared")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    (broken / "model.safetensors").write_bytes(b"")
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    cases = [
        ((tmp_path / "missing", "--format", "vllm", tmp_path / "o1"), "not a checkpoint directory"),
        ((nothing, "--format", "vllm", tmp_path / "o2"), "no config.json"),
        ((broken, "--format", "vllm", tmp_path / "o3"), "not valid JSON"),
        ((eagle3, "--format", "tensorrt", tmp_path / "o4"), "invalid choice"),
        ((eagle3, "--format", "speculators", tmp_path / "o5"), "needs --target"),
        ((shared, "--format", "vllm", tmp_path / "o6"), "pass --target"),
        ((shared, "--format", "vllm", tmp_path / "o7", "--target", tmp_path), "not a Hugging Face checkpoint"),
    ]
    for argv, words in cases:
        code, err = _cli(capsys, *argv)
        assert code == 1 and err.count("\n") == 1 and words in err, (argv, err)
        assert "Traceback" not in err


def test_existing_output_is_kept_without_overwrite(tmp_path, capsys):
    eagle3 = next(p for p in SHIPPED if p.name == "eagle3-byte-llama")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, err = _cli(capsys, eagle3, "--format", "vllm", out)
    assert code == 1 and "--overwrite" in err and (out / "keep.txt").read_text() == "mine"
    code, err = _cli(capsys, eagle3, "--format", "speculators", out, "--overwrite")  # fails: no --target
    assert code == 1 and "needs --target" in err and (out / "keep.txt").read_text() == "mine"
    assert cli_main(["export", str(eagle3), "--format", "vllm", str(out), "--overwrite"]) == 0
    assert not (out / "keep.txt").exists() and (out / "model.safetensors").is_file()
    again = tmp_path / "again"
    code, err = _cli(capsys, out, "--format", "speculators", again)  # an export is not re-exported
    assert code == 1 and "already in a published layout" in err and not again.exists()
