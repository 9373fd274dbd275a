"""Streaming: ``LLM.generate_stream`` / ``generate(stream=True)`` / ``chat(stream=True)`` yield a
verified chunk at a time, and the incremental detokenizer never emits half a character while its
chunks add up to the full decode."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gguf_helpers
from specpath_engine.detokenizer import REPLACEMENT, IncrementalDetokenizer
from specpath_engine.llm import LLM, SamplingParams
from specpath_engine.tokenizer import ByteTokenizer, load_tokenizer


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    file = tmp_path_factory.mktemp("stream") / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    return file


@pytest.fixture(scope="module")
def bpe(gguf_file):
    return load_tokenizer(gguf_file)


def _stream(tok, ids, cuts, stop=()):
    """Chunks of the detokenizer fed ``ids`` split at ``cuts``, plus its final flush."""
    detok = IncrementalDetokenizer(tok, stop=stop)
    bounds = [0, *sorted(set(c % (len(ids) + 1) for c in cuts)), len(ids)]
    chunks = [detok.add(ids[a:b]) for a, b in zip(bounds, bounds[1:])]
    return chunks, detok


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.integers(1, 255), max_size=60), cuts=st.lists(st.integers(0, 60), max_size=20))
def test_byte_tokens_chunks_concatenate_to_the_full_decode(ids, cuts):
    tok = ByteTokenizer()
    chunks, detok = _stream(tok, ids, cuts)
    tail = detok.finish()
    assert "".join(chunks) + tail == tok.decode(ids)
    assert not any(c.endswith(REPLACEMENT) for c in chunks)  # never a half character mid-stream


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=30), cuts=st.lists(st.integers(0, 200), max_size=20))
def test_valid_utf8_streams_without_any_replacement_character(text, cuts):
    tok = ByteTokenizer()
    ids = [b for b in text.encode("utf-8") if b != 0]
    chunks, detok = _stream(tok, ids, cuts)
    assert REPLACEMENT not in "".join(chunks)
    assert "".join(chunks) + detok.finish() == tok.decode(ids)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_bpe_tokens_chunks_concatenate_to_the_full_decode(bpe, data):
    ids = data.draw(st.lists(st.integers(3, bpe.vocab_size - 1), max_size=40))
    cuts = data.draw(st.lists(st.integers(0, 40), max_size=15))
    chunks, detok = _stream(bpe, ids, cuts)
    assert "".join(chunks) + detok.finish() == bpe.decode(ids)
    assert not any(c.endswith(REPLACEMENT) for c in chunks)


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet="ab\u00e9\u20ac", max_size=20), cuts=st.lists(st.integers(0, 80), max_size=20),
       stop=st.text(alphabet="ab\u00e9", min_size=1, max_size=3))
def test_stop_strings_are_held_back_and_cut(text, cuts, stop):
    tok = ByteTokenizer()
    ids = list(text.encode("utf-8"))
    chunks, detok = _stream(tok, ids, cuts, stop=(stop,))
    full = tok.decode(ids)
    expected = full[:full.find(stop)] if stop in full else full
    streamed = "".join(chunks)
    assert expected.startswith(streamed)  # nothing past a stop string ever goes out
    assert stop not in streamed
    assert streamed + detok.finish(expected) == expected


def test_generate_stream_yields_verified_chunks_that_add_up_to_generate():
    # (a fixed draft length: whether the adaptive policy drafts at all depends on step timings,
    # and beside CI's other jobs at 2+ loads per core it once decoded both replies plainly)
    llm = LLM(None, {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4,
                     "draft_length_policy": "fixed"})
    prompts = ["def add(a, b):\n    return a + b\n\ndef add(", "import os\nimport sys\nimport "]
    params = SamplingParams(max_tokens=40)
    whole = llm.generate(prompts, params)
    chunks = list(llm.generate(prompts, params, stream=True))
    for i, out in enumerate(whole):
        mine = [c for c in chunks if c.index == i]
        assert "".join(c.text for c in mine) == out.text
        assert [t for c in mine for t in c.token_ids] == out.token_ids
        assert [c.finished for c in mine] == [False] * (len(mine) - 1) + [True]
        assert mine[-1].output.text == out.text and mine[-1].output.finish_reason == out.finish_reason
        assert len(mine) < len(out.token_ids)  # accepted drafts arrive together, not a token at a time
    assert llm.metrics.num_generated_tokens == sum(len(o.token_ids) for o in whole)


def test_stream_with_a_stop_string_matches_generate():
    llm = LLM()
    params = SamplingParams(max_tokens=48, stop=["\n\n"])
    whole = llm.generate(["class Point:\n    def __init__(self, x, y):\n"], params)[0]
    chunks = list(llm.generate_stream(["class Point:\n    def __init__(self, x, y):\n"], params))
    assert "".join(c.text for c in chunks) == whole.text
    assert "\n\n" not in "".join(c.text for c in chunks)


def test_breaking_out_early_aborts_and_leaves_the_llm_usable():
    llm = LLM()
    stream = llm.generate_stream(["def main():\n"], SamplingParams(max_tokens=40))
    next(stream)
    stream.close()
    assert not llm.engine.has_unfinished
    assert llm.engine.blocks.num_free_blocks == llm.engine.blocks.num_blocks
    assert llm.generate("def main():\n", SamplingParams(max_tokens=4))[0].token_ids


def test_bad_input_fails_before_the_first_chunk():
    llm = LLM()
    with pytest.raises(ValueError, match="SamplingParams"):
        llm.generate_stream(["a", "b"], [SamplingParams()])


def test_chat_stream_matches_chat(gguf_file):
    llm = LLM(str(gguf_file))
    messages = [{"role": "user", "content": "the 12 def"}]
    params = SamplingParams(max_tokens=12, ignore_eos=True)
    whole = llm.chat(messages, params)[0]
    chunks = list(llm.chat(messages, params, stream=True))
    assert "".join(c.text for c in chunks) == whole.text
    assert [t for c in chunks for t in c.token_ids] == whole.token_ids
    assert chunks[-1].finished and chunks[-1].output.prompt.endswith("<|im_start|>assistant\n")


def test_cli_run_stream_prints_what_run_prints(capsys):
    from specpath.cli import main

    args = ["run", "--prompt", "import os\nimport ", "--max-tokens", "24",
            "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}']
    assert main(args) == 0
    plain = capsys.readouterr()
    assert main([*args, "--stream"]) == 0
    streamed = capsys.readouterr()
    assert streamed.out == plain.out
    assert "load " in streamed.err and "tok/s" in streamed.err


def test_cli_run_stream_with_json_is_one_line(capsys):
    from specpath.cli import main

    assert main(["run", "--prompt", "x", "--stream", "--json"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pick one" in err
