"""The training-data step for BPE targets (specpath_train.target_text), end to end on the
embedded byte model given a byte-identity ``tokenizer.json`` and a ChatML template."""

import json
import shutil

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_train import target_text as tt
from specpath_engine.modeling.named_models import embedded_model_path as embedded_target_path

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _byte_chars() -> list[str]:
    """GPT-2's byte -> printable character table (what the ByteLevel pre-tokenizer emits)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


@pytest.fixture(scope="module")
def byte_target(tmp_path_factory):
    """The embedded model with a tokenizer.json whose ids are the UTF-8 bytes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    out = tmp_path_factory.mktemp("byte_target")
    for name in ("config.json", "model.safetensors"):
        shutil.copy(embedded_target_path() / name, out / name)
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(_byte_chars())}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML}))
    return out


def test_the_byte_tokenizer_fixture_maps_text_to_its_bytes(byte_target):
    tok = tt.load_tokenizer(byte_target)
    text = "def f(x):\n    return 12 + x  # é"
    assert tok.encode(text).ids == list(text.encode("utf-8"))


def test_chat_prompts_use_the_template_in_a_sandbox():
    text = tt.render_chat(CHATML, [{"role": "user", "content": "hi"}])
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    from jinja2.exceptions import SecurityError

    with pytest.raises(SecurityError):
        tt.render_chat("{{ messages.__class__.__mro__ }}{{ ''.__class__.__subclasses__() }}", [])


def test_prompts_are_deterministic_and_split_code_then_chat(byte_target):
    tok = tt.load_tokenizer(byte_target)
    a = tt.build_prompts(tok, CHATML, split="heldout", num_code=3, num_chat=2, seed=4, max_prompt_tokens=120)
    b = tt.build_prompts(tok, CHATML, split="heldout", num_code=3, num_chat=2, seed=4, max_prompt_tokens=120)
    assert a == b and len(a) == 5 and all(0 < len(p) <= 120 for p in a)
    chats = [bytes(p).decode("utf-8", "replace") for p in a[3:]]
    assert all(c.startswith("<|im_start|>user\n") and c.endswith("<|im_start|>assistant\n") for c in chats)
    assert tt.build_prompts(tok, CHATML, split="heldout", num_code=3, num_chat=2, seed=5, max_prompt_tokens=120) != a


@given(st.integers(0, 10_000))
@settings(max_examples=20, deadline=None)
def test_general_chat_requests_are_distinct_deterministic_and_split_apart(seed):
    train = tt.general_instructions("train", 60, seed=seed)
    held = tt.general_instructions("heldout", 15, seed=seed)
    assert len(train) == len(set(train)) == 60 and len(held) == len(set(held)) == 15
    assert not set(train) & set(tt.general_instructions("heldout", 60, seed=seed + 1))  # the split is by text
    assert train == tt.general_instructions("train", 60, seed=seed)
    assert all(t[0].isupper() and "{" not in t for t in train + held)


def test_the_demo_prompts_are_not_training_requests():
    from specpath_engine.cli_run import REAL_DEMO_PROMPTS

    demo = {m[0]["content"] for kind, m in REAL_DEMO_PROMPTS if kind == "chat"}
    assert demo and not demo & set(tt.general_instructions("train", 2000, seed=2))
    assert not demo & set(tt.general_instructions("train", 4000, seed=3, wider=True))


@given(st.integers(0, 10_000))
@settings(max_examples=10, deadline=None)
def test_the_wider_pool_keeps_the_held_out_split_of_the_first(seed):
    held = set(tt.general_instructions("heldout", 200, seed=seed))
    wider_train = tt.general_instructions("train", 300, seed=seed, wider=True)
    assert len(set(wider_train)) == 300 and not held & set(wider_train)  # one split rule for both pools
    assert all(t[0].isupper() and "{" not in t for t in wider_train)
    assert wider_train == tt.general_instructions("train", 300, seed=seed, wider=True)


def test_the_wider_pool_is_the_first_one_extended():
    assert tt.WIDER_GENERAL_TASKS[:len(tt.GENERAL_TASKS)] == tt.GENERAL_TASKS
    for key, values in tt.GENERAL_FILLERS.items():  # appended, so old entries keep their place
        assert tt.WIDER_GENERAL_FILLERS[key][:len(values)] == values
    assert len(set(tt.general_instructions("train", 5000, seed=1, wider=True))) > \
        3 * len(set(tt.general_instructions("train", 5000, seed=1)))


def test_general_requests_are_templated_after_the_stdlib_chats(byte_target):
    tok = tt.load_tokenizer(byte_target)
    got = tt.build_prompts(tok, CHATML, split="train", num_code=1, num_chat=1, num_general=2, seed=4)
    assert len(got) == 4
    want = [tt.render_chat(CHATML, [{"role": "user", "content": m}]) for m in tt.general_instructions("train", 2, seed=6)]
    assert [bytes(p).decode("utf-8") for p in got[2:]] == want


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=20), max_size=8), st.integers(1, 12))
def test_pack_windows_cuts_the_joined_stream(seqs, window):
    rows = tt.pack_windows(seqs, window)
    stream = [t for s in seqs for t in s]
    assert rows.shape == (len(stream) // window, window)
    assert rows.reshape(-1).tolist() == stream[:rows.numel()]


def test_build_dataset_end_to_end_resumes_and_merges(byte_target, tmp_path):
    from specpath_engine.model import LlamaModel

    torch.set_num_threads(1)
    layers = [1, 4, 5]
    kwargs = dict(num_code=2, num_chat=1, num_general=1, heldout_code=1, heldout_chat=1, window=32, max_new_tokens=12, chunk=2,
                  dtype=torch.float32, raw_windows=2, seed=3, log=lambda s: None)
    data = tt.build_dataset(byte_target, tmp_path / "a", layers, **kwargs)
    meta = json.loads((data / "features.json").read_text())
    assert meta["sequences"] == {"heldout": 2, "train": 4} and meta["key"]["layers"] == layers
    assert not list(data.glob("feat-*.safetensors")) and not list(data.glob("feat-*.lock"))  # chunk files removed once merged
    got = tt.load_dataset(data, [5, 1])
    n, w = got["tokens"].shape
    assert w == 32 and got["heldout"] == meta["heldout"] >= 1 and n > got["heldout"]
    assert got["taps"].shape == (n, w, 2, 192) and got["topk_ids"].shape == (n, w, 8)
    target = LlamaModel.from_pretrained(byte_target)
    out = target.forward(got["tokens"][:2], torch.arange(w), hidden_layers=(5, 1))
    assert torch.allclose(got["taps"][:2].float(), out.hidden_states, atol=1e-2, rtol=1e-2)
    assert (got["topk_ids"][:2, :, 0] == out.logits.argmax(-1)).float().mean() > 0.99
    assert torch.all(got["topk_probs"][..., :-1] >= got["topk_probs"][..., 1:])
    with pytest.raises(ValueError, match="not \\[2\\]"):
        tt.load_dataset(data, [2])
    # a second call finds the finished cache and does nothing
    assert tt.build_dataset(byte_target, tmp_path / "a", layers, **{**kwargs, "log": pytest.fail}) == data
    # generation chunks are reused by a restarted build
    for f in ("features.json", "features.safetensors"):
        (data / f).unlink()
    seen = []
    tt.build_dataset(byte_target, tmp_path / "a", layers, **{**kwargs, "log": seen.append})
    assert not any("new tokens" in line for line in seen)
    merged = tt.load_dataset(tt.merge_datasets([data, data], tmp_path / "m"), layers)
    h = got["heldout"]
    assert merged["heldout"] == 2 * h
    assert torch.equal(merged["tokens"][:h], got["tokens"][:h]) and torch.equal(merged["tokens"][h:2 * h], got["tokens"][:h])
    assert torch.equal(merged["tokens"][2 * h:2 * h + n - h], got["tokens"][h:])
    # an earlier run's data beside a new one: only the first part's held-out windows stay held
    # out, the others' are left out; a subset of the layers is kept
    first = tt.merge_datasets([data, data], tmp_path / "f", layers=[5, 1], heldout="first")
    meta_f = json.loads((first / "features.json").read_text())
    assert meta_f["heldout"] == h and meta_f["key"]["layers"] == [5, 1] and len(meta_f["parts"]) == 2
    only = tt.load_dataset(first, [5, 1])
    assert only["tokens"].shape[0] == h + 2 * (n - h) and only["heldout"] == h
    assert torch.equal(only["tokens"][:h], got["tokens"][:h])
    assert torch.equal(only["tokens"][h:h + n - h], got["tokens"][h:])
    assert torch.equal(only["tokens"][h + n - h:], got["tokens"][h:])
    assert torch.equal(only["taps"], torch.cat([got["taps"][:h], got["taps"][h:], got["taps"][h:]]))
    assert torch.equal(only["topk_probs"][h:h + n - h], got["topk_probs"][h:])
    with pytest.raises(ValueError, match="not \\[2\\]"):
        tt.merge_datasets([data, first], tmp_path / "g", layers=[2, 5])
    with pytest.raises(ValueError, match="not a finished data directory"):
        tt.merge_datasets([data, tmp_path / "nothing"], tmp_path / "g")
