"""The training recipes run end to end at toy sizes and write drafts the method can use."""

import json

import pytest
import torch

import tiny_drafts
from specpath_train.recipes import draft_model as train
from specpath_train.recipes import draft_model_arch as arch
from specpath_draft_model.vocab import ByteStringVocab, to_alphabet


def test_pard_layout_matches_inference():
    """Copy c at position i sees the real tokens up to i - c and its own masks i-c+1..i, as the
    draft does at inference with c masks appended after the real context."""
    positions, mask, valid = train.pard_layout(length=5, depth=2)
    assert positions.tolist() == [0, 1, 2, 3, 4] * 3
    row = lambda copy, i: mask[copy * 5 + i].view(3, 5).nonzero().tolist()  # noqa: E731
    assert row(0, 3) == [[0, 0], [0, 1], [0, 2], [0, 3]]
    assert row(2, 4) == [[0, 0], [0, 1], [0, 2], [2, 3], [2, 4]]
    assert valid.view(3, 5)[2].tolist() == [False, False, True, True, True]


def test_byte_alphabet_round_trip():
    vocab = ByteStringVocab(tiny_drafts.bpe_tokenizer())
    data = bytes(range(256)) + "déjà vu\n\tx = 1".encode() + b"\xff\xfe"
    ids = vocab.encode(data)
    assert b"".join(vocab.bytes[i] for i in ids) == data
    assert len(to_alphabet(data)) == len(data)
    assert vocab.prefix_mask(b"de").sum() >= 1 and not vocab.prefix_mask(b"de")[vocab.encode(b"x")[0]]


@pytest.mark.slow
def test_recipes_write_usable_drafts(tmp_path):
    target = tiny_drafts.target()
    data = str(tmp_path / "text.pt")
    common = ["--data", data, "--heldout", "2", "--max-steps", "3", "--context", "32", "--batch", "2",
              "--layers", "1", "--hidden", "32", "--ffn", "64"]
    train.main(["generate", "--target", target, "--out", data, "--num-prompts", "8", "--batch", "4",
                "--prompt-min", "16", "--prompt-max", "24", "--new-tokens", "12", "--corpus-windows", "4", "--window", "40"])
    saved = torch.load(data, weights_only=False)
    assert len(saved["sequences"]) == 12 and saved["soft"][0][0].shape == (12, train.SOFT_LABELS)
    assert saved["soft"][-1][0].shape == (39, train.SOFT_LABELS) and saved["kinds"][-1] == (1, -1.0)
    train.main(["ar", *common, "--out", str(tmp_path / "ar"), "--log", str(tmp_path / "ar.log")])
    train.main(["pard", *common, "--depth", "3", "--init", str(tmp_path / "ar"),
                "--out", str(tmp_path / "pard"), "--log", str(tmp_path / "pard.log")])
    train.main(["bpe", *common, "--vocab", "300", "--tokenizer-bytes", "20000",
                "--out", str(tmp_path / "bpe0"), "--log", str(tmp_path / "bpe.log")])
    train.main(["bpe", *common, "--init", str(tmp_path / "bpe0"),  # continue: same vocabulary
                "--out", str(tmp_path / "bpe"), "--log", str(tmp_path / "bpe.log")])
    assert (tmp_path / "bpe" / "tokenizer.json").read_text() == (tmp_path / "bpe0" / "tokenizer.json").read_text()
    for name, recipe in (("ar", "ar"), ("pard", "pard"), ("bpe", "bpe")):
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert config["specpath_draft"]["recipe"] == recipe and config["specpath_draft"]["steps"] == 3
    assert json.loads((tmp_path / "pard" / "config.json").read_text())["pard_token_id"] == train.PARD_MASK_TOKEN

    from specpath_engine.testing.engine import greedy_identity

    for options in ({"model": str(tmp_path / "ar")},
                    {"model": str(tmp_path / "pard"), "parallel_drafting": True},
                    {"model": str(tmp_path / "bpe"), "use_heterogeneous_vocab": True}):
        result = greedy_identity({"method": "draft_model", "num_speculative_tokens": 3, **options},
                                 prompts=["def f(x):\n    return x\n"], max_tokens=16)
        assert result.speculative == result.plain


def test_growing_a_draft_keeps_its_function():
    """--init with more --layers appends identity layers: same logits before training."""
    base = arch.new_draft(256, 1, 32, 64, 128)
    grown = arch.grow_draft(base, 3)
    ids = torch.randint(0, 256, (2, 12))
    positions = torch.arange(12)
    assert grown.config.num_hidden_layers == 3
    torch.testing.assert_close(arch.batched_logits(grown, ids, positions, None),
                               arch.batched_logits(base, ids, positions, None))
