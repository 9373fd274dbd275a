"""TLI vocabulary maps: byte-level and SentencePiece tokens meet on the bytes they stand for."""

import pytest
import torch

from specpath_engine.sample import VocabMapping, rejection_sample
from specpath_engine.sample.tli import detect_space_marker, token_bytes


def test_space_markers_and_bytes():
    assert detect_space_marker(["Ġthe", "a", "Ġof"]) == "Ġ"
    assert detect_space_marker(["▁the", "a"]) == "▁"
    assert detect_space_marker(["the", "a"]) is None
    assert token_bytes("Ġthe", "Ġ") == b" the" == token_bytes("▁the", "▁")
    assert token_bytes("Ċ", "Ġ") == b"\n" == token_bytes("<0x0A>", "▁")
    assert token_bytes("<|endoftext|>", "Ġ") == b"<|endoftext|>"


def test_maps_are_inverse_on_the_intersection():
    target = {"Ġthe": 0, "Ċ": 1, "a": 2, "Ġcat": 3, "zz": 4}
    draft = ["<unk>", "▁cat", "a", "<0x0A>", "▁the", "▁dog", "▁the"]
    m = VocabMapping.from_vocabs(draft, target)
    assert m.draft_to_target.tolist() == [-1, 3, 2, 1, 0, -1, -1]  # duplicate "▁the": smallest id wins
    assert m.target_to_draft.tolist() == [4, 3, 2, 1, -1]
    assert (m.draft_vocab_size, m.target_vocab_size, m.num_shared) == (7, 5, 4)
    logits = m.mask_draft_logits(torch.zeros(7))
    assert torch.isinf(logits).tolist() == [True, False, False, False, False, True, True]
    assert m.target_ids_to_draft(torch.tensor([0, 4]), unk_id=0).tolist() == [4, 0]


def test_to_target_lifts_and_renormalises():
    m = VocabMapping.from_vocabs(["x", "a", "b"], ["b", "c", "a"])
    ids, probs = m.to_target(torch.tensor([1, 2]), torch.tensor([[0.5, 0.25, 0.25], [0.0, 0.5, 0.5]]))
    assert ids.tolist() == [2, 0]
    assert torch.allclose(probs, torch.tensor([[0.5, 0.0, 0.5], [0.5, 0.0, 0.5]]))


def test_errors():
    m = VocabMapping.from_vocabs(["x", "a"], ["a", "b"])
    with pytest.raises(ValueError, match="outside the shared vocabulary"):
        m.draft_ids_to_target(torch.tensor([0]))
    with pytest.raises(ValueError, match="share no token"):
        VocabMapping.from_vocabs(["x"], ["y"])
    with pytest.raises(ValueError, match="targets a vocabulary of 2"):
        rejection_sample(torch.tensor([1]), [1], torch.randn(1, 3), [0], [0.0], vocab_mapping=m)


class _Tokenizer:
    def __init__(self, vocab, space):
        self.vocab, self.space = vocab, space

    def get_vocab(self):
        return self.vocab

    def encode(self, text, add_special_tokens=False):
        return [self.vocab[self.space + "a"]]

    def convert_ids_to_tokens(self, ids):
        inverse = {i: t for t, i in self.vocab.items()}
        return [inverse[i] for i in ids]


def test_from_tokenizers_detects_markers_by_tokenizing():
    draft = _Tokenizer({"▁a": 0, "Ġx": 1}, "▁")  # a stray "Ġx" must not fool detection
    target = _Tokenizer({"Ġa": 0, "b": 1}, "Ġ")
    m = VocabMapping.from_tokenizers(draft, target)
    assert m.draft_to_target.tolist() == [0, -1]


def test_greedy_verification_in_the_target_vocabulary():
    m = VocabMapping.from_vocabs(["▁b", "x", "a"], ["a", "Ġb", "c"])
    logits = torch.tensor([[0.0, 5.0, 0.0], [5.0, 0.0, 0.0]])  # target argmax: "Ġb", then "a"
    out = rejection_sample(torch.tensor([0, 0]), [2], logits, [2], [0.0], vocab_mapping=m)
    assert out.tolist() == [[1, 0, -1]]
