"""``specpath_engine.bridges.hf.generate`` inside transformers' real ``generate()``: greedy output is
HF's greedy output for every kind of drafter (model-free, plugin, standalone draft, PARD and
the hidden-state heads shipped for the embedded model), sampled output follows the target
distribution (chi-square, as tests/sample), and bad input is a one-line error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from specpath_engine.bridges.hf import generate as specpath_generate  # noqa: E402
from specpath.errors import SpeculativeConfigError  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1] / "sample"))
from _sample_helpers import chi_square_pvalue  # noqa: E402

PROMPTS = [
    b"import os\nimport sys\n\ndef main(argv):\n    for name in os.listdir(argv[1]):\n        print(name)\n\n\ndef",
    b"class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n    def __repr__(self):\n",
]


@pytest.fixture(scope="module")
def embedded():
    from specpath_engine.model import default_model_path

    torch.set_num_threads(1)
    return transformers.AutoModelForCausalLM.from_pretrained(str(default_model_path()), dtype=torch.float32).eval()


@pytest.mark.parametrize(
    "config",
    [
        {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4},
        {"method": "freqgram", "num_speculative_tokens": 3},
        {"method": "draft_model", "num_speculative_tokens": 3},
        {"method": "eagle", "num_speculative_tokens": 3},
        {"method": "eagle3", "num_speculative_tokens": 3},
        {"method": "mtp", "num_speculative_tokens": 1},
        {"method": "dflash", "num_speculative_tokens": 3},
        {"method": "dspark", "num_speculative_tokens": 3},
    ],
    ids=lambda c: c["method"],
)
def test_greedy_equals_hf_greedy(embedded, config):
    for prompt in PROMPTS:
        ids = torch.tensor([list(prompt)])
        expected = embedded.generate(ids, max_new_tokens=48, do_sample=False)
        got = embedded.generate(ids, max_new_tokens=48, do_sample=False, custom_generate=specpath_generate,
                                speculative_config=config)
        assert got.tolist() == expected.tolist()


def test_stops_where_greedy_stops(embedded):
    """An EOS inside an accepted draft run ends the output exactly where greedy ends it."""
    ids = torch.tensor([list(PROMPTS[0])])
    plain = embedded.generate(ids, max_new_tokens=40, do_sample=False)
    eos = int(plain[0, ids.shape[1] + 17])  # a token greedy emits mid-way: make it the stop token
    expected = embedded.generate(ids, max_new_tokens=40, do_sample=False, eos_token_id=eos)
    got = embedded.generate(ids, max_new_tokens=40, do_sample=False, eos_token_id=eos,
                            custom_generate=specpath_generate,
                            speculative_config={"method": "ngram", "num_speculative_tokens": 6, "prompt_lookup_min": 1})
    assert got.tolist() == expected.tolist()
    assert got.shape[1] < ids.shape[1] + 40


def test_return_dict_and_json_config(embedded):
    ids = torch.tensor([list(PROMPTS[1])])
    expected = embedded.generate(ids, max_new_tokens=16, do_sample=False)
    out = embedded.generate(ids, max_new_tokens=16, do_sample=False, return_dict_in_generate=True,
                            custom_generate=specpath_generate,
                            speculative_config='{"method": "ngram", "num_speculative_tokens": 2}')
    assert out.sequences.tolist() == expected.tolist()


def test_config_errors_are_one_line(embedded):
    ids = torch.tensor([list(PROMPTS[0])])
    with pytest.raises(SpeculativeConfigError) as err:
        embedded.generate(ids, max_new_tokens=4, custom_generate=specpath_generate,
                          speculative_config={"method": "ngram", "prompt_lookup_max": "x"})
    assert "\n" not in str(err.value) and "prompt_lookup_max" in str(err.value)
    with pytest.raises(SpeculativeConfigError, match="speculative_config: is required"):
        embedded.generate(ids, max_new_tokens=4, custom_generate=specpath_generate)
    with pytest.raises(ValueError, match="batch 1"):
        embedded.generate(torch.cat([ids, ids]), max_new_tokens=4, custom_generate=specpath_generate,
                          speculative_config={"method": "ngram"})


@pytest.mark.parametrize(
    ("config", "field", "words"),
    [
        ({"method": "ngram", "num_speculative_tokens": 4, "rejection_sample_method": "synthetic",
          "synthetic_acceptance_length": 2.0}, "rejection_sample_method", "standard rejection sampling only"),
        ({"method": "ngram", "num_speculative_tokens": 4, "rejection_sample_method": "block"},
         "rejection_sample_method", "standard rejection sampling only"),
        ({"method": "ngram", "num_speculative_tokens": 4, "draft_tensor_parallel_size": 4},
         "draft_tensor_parallel_size", "unsharded, on one device"),
        ({"method": "draft_model", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 4},
         "draft_tensor_parallel_size", "must be 1 or the target's"),
    ],
    ids=["synthetic", "block", "ngram-draft-tp", "draft-model-tp"],
)
@pytest.mark.filterwarnings("ignore::specpath.config.rules.LossyVerificationWarning")
def test_what_the_bridge_cannot_honour_is_refused(embedded, config, field, words):
    """Never a lossy synthetic run passed off as standard verification, nor a draft TP it ignores."""
    ids = torch.tensor([list(PROMPTS[0])])
    with pytest.raises(SpeculativeConfigError) as err:
        embedded.generate(ids, max_new_tokens=4, custom_generate=specpath_generate, speculative_config=config)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"speculative_config.{field}:") and words in text


def _conditional_counts(model, prompt, config, n, seed):
    """Counts of the second generated token given the first, over ``n`` sampled generations of
    three tokens (the second is decided by verification of one draft)."""
    torch.manual_seed(seed)
    vocab = model.config.vocab_size
    counts = torch.zeros(vocab, vocab, dtype=torch.long)
    ids = torch.tensor([prompt])
    for _ in range(n):
        out = model.generate(ids, max_new_tokens=3, do_sample=True, top_k=0, temperature=1.0, eos_token_id=None,
                             custom_generate=specpath_generate, speculative_config=config)
        a, b = out[0, len(prompt):len(prompt) + 2].tolist()
        counts[a, b] += 1
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ngram", "draft_random"])
def test_sampled_output_follows_target(tiny_pair, kind):
    """Pearson's chi-square on the second token given the first, against the target's softmax."""
    target_dir, draft_dir = tiny_pair
    model = transformers.AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    prompt = [1, 2, 3, 1, 2, 3, 1, 2]
    if kind == "ngram":
        config = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1, "prompt_lookup_max": 2}
    else:
        config = {"method": "draft_model", "model": draft_dir, "num_speculative_tokens": 2, "draft_sample_method": "random"}
    counts = _conditional_counts(model, prompt, config, n=600, seed=3)
    with torch.no_grad():
        first = torch.softmax(model(torch.tensor([prompt])).logits[0, -1].float(), -1)
        for a in range(model.config.vocab_size):
            if counts[a].sum() < 60:
                continue
            p = torch.softmax(model(torch.tensor([prompt + [a]])).logits[0, -1].float(), -1)
            assert chi_square_pvalue(counts[a], p) > 1e-6, (a, counts[a].tolist(), p.tolist())
    assert chi_square_pvalue(counts.sum(1), first) > 1e-6


def test_streamer_gets_every_token_as_plain_generate_gives_it(embedded):
    """transformers drops ``streamer`` for a callable ``custom_generate`` after putting the prompt;
    the bridge still feeds it each verified token and ends it once, as ``_sample`` would."""

    class Recorder:
        def __init__(self):
            self.puts, self.ends = [], 0

        def put(self, value):
            self.puts.append(value.tolist())

        def end(self):
            self.ends += 1

    ids = torch.tensor([list(PROMPTS[0])])
    plain, spec = Recorder(), Recorder()
    want = embedded.generate(ids, max_new_tokens=16, do_sample=False, streamer=plain)
    got = embedded.generate(ids, max_new_tokens=16, do_sample=False, custom_generate=specpath_generate,
                            speculative_config={"method": "ngram", "num_speculative_tokens": 3}, streamer=spec)
    assert got.tolist() == want.tolist()
    flat = lambda puts: [t for p in puts[1:] for t in (p if isinstance(p, list) else [p])]  # noqa: E731
    assert spec.puts[0] == plain.puts[0] == ids.tolist()
    assert flat(spec.puts) == flat(plain.puts) == want[0, ids.shape[1]:].tolist()
    assert spec.ends == plain.ends == 1
