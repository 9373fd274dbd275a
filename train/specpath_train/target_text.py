"""Training data for drafters of a real, BPE-tokenised target (SmolLM2-135M-Instruct and kin).

A drafter must predict *the target*, so the text is the target's own: prompts built from real
text (Python standard-library sources, and chat instructions made from them, rendered with the
checkpoint's chat template) and continued by the target with the specpath engine (bf16,
batched, on the native kernels: :func:`generation_model`; greedy and sampled). Next to each window's chosen layer outputs the cache keeps the
target's top-k next-token ids and probabilities, so no recipe ever pays for a full-vocabulary
soft cross-entropy per step (49,152 columns for SmolLM2: ~10x the cost of the head itself).

Every stage writes its result under the data directory and is skipped when the file exists,
so a killed run resumes where it stopped. The output ``features.safetensors`` /
``features.json`` pair is the format :func:`specpath_train.trainer.cached_features` reads;
``tokens[:heldout]`` come from held-out stdlib files (see ``specpath_engine.corpus``).
"""

from __future__ import annotations

import ast
import json
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

CHAT_TASKS = (
    "Explain what this Python function does:\n\n```python\n{source}\n```",
    "Write a docstring for this function and show the function with it:\n\n```python\n{bare}\n```",
    "Can you find any bugs or edge cases in this code?\n\n```python\n{source}\n```",
    "Rewrite this function to make it easier to read:\n\n```python\n{bare}\n```",
    "Write a Python function `{name}` that does this: {summary}",
    "Summarize in two sentences what this documentation says:\n\n{doc}",
    "Write a short unit test for this function:\n\n```python\n{source}\n```",
    "What is the purpose of the `{name}` function in the Python module `{module}`?",
)
"""Instruction templates filled from a stdlib function (source, docstring, name, module)."""

GENERAL_TASKS = (
    "What is {topic}?",
    "Explain {topic} in simple terms.",
    "Give me {n} tips for {activity}.",
    "How do I get better at {activity}?",
    "Write a short poem about {topic}.",
    "What are the pros and cons of {activity}?",
    "Tell me a fun fact about {thing}.",
    "How many {part} does {a_thing} have?",
    "Describe {a_thing} to a child.",
    "Write a Python function that {code_task}.",
    "How would you {code_task} in Python?",
    "Can you list {n} common mistakes people make when {activity}?",
    "Summarize the history of {topic} in a few sentences.",
    "Why is {topic} important?",
    "Write a short story about {a_thing} that learns {activity}.",
)
"""Templates of everyday chat requests (general questions, advice, short writing, small coding
tasks): the other kind of chat a small instruct model meets, filled from the lists below."""

GENERAL_FILLERS: dict[str, tuple[str, ...]] = {
    "topic": ("photosynthesis", "gravity", "the water cycle", "machine learning", "the internet", "democracy",
              "climate change", "the immune system", "black holes", "recycling", "the stock market", "electricity",
              "the moon", "volcanoes", "vaccines", "the French revolution", "friendship", "sleep", "music theory",
              "compound interest", "the solar system", "DNA", "rainbows", "encryption", "the Roman empire",
              "earthquakes", "evolution", "inflation", "the printing press", "coffee", "chess", "the ocean tides",
              "renewable energy", "a healthy diet", "version control", "open source software", "the human brain",
              "bees", "the Olympic games", "time zones", "sorting algorithms", "databases", "the weather"),
    "activity": ("learning a new language", "cooking at home", "public speaking", "studying for exams", "running",
                 "saving money", "writing an essay", "working from home", "gardening", "reading more books",
                 "learning to program", "taking photos", "managing time", "making friends", "traveling on a budget",
                 "playing the guitar", "debugging code", "drawing", "staying focused", "keeping a journal",
                 "writing unit tests", "giving feedback", "learning math", "cleaning the house", "swimming"),
    "thing": ("octopuses", "the Eiffel tower", "penguins", "honey", "the human heart", "Mars", "elephants",
              "bananas", "lightning", "owls", "the Sahara desert", "snails", "diamonds", "the Amazon river",
              "cats", "whales", "trees", "the Great Wall of China", "ants", "glass"),
    "a_thing": ("a cat", "a dog", "an ant", "a bird", "a horse", "a fish", "a robot", "a tree", "a car", "a bee",
                "a frog", "a starfish", "a bicycle", "a butterfly", "a snake", "an octopus", "a cow", "a chair"),
    "part": ("legs", "eyes", "wheels", "wings", "hearts", "teeth", "arms", "bones"),
    "code_task": ("reverses a list", "counts the vowels in a string", "returns the largest number in a list",
                  "checks whether a number is prime", "computes the factorial of n", "merges two sorted lists",
                  "removes duplicates from a list", "reads a file and counts its lines", "converts Celsius to Fahrenheit",
                  "finds the most common word in a text", "returns the n-th Fibonacci number", "flattens a nested list",
                  "checks whether two strings are anagrams", "sums the digits of an integer", "sorts a dictionary by value",
                  "validates an email address", "computes the average of a list", "capitalizes every word in a sentence",
                  "finds the second largest number in a list", "counts how often each character appears"),
    "n": ("three", "five", "four", "two", "some"),
}
"""What :data:`GENERAL_TASKS` are filled with (no evaluation prompt of the demo among them)."""

WIDER_GENERAL_TASKS = GENERAL_TASKS + (
    "What is the difference between {topic} and {topic2}?",
    "Can you give me an example of {topic}?",
    "I want to start {activity}. Where should I begin?",
    "Write a haiku about {thing}.",
    "List {n} interesting facts about {thing}.",
    "What does {a_thing} eat?",
    "Explain how {topic} works step by step.",
    "Write an email to a friend about {activity}.",
    "Write a Python class that {code_task}.",
    "Explain this Python error: {error}",
)
""":data:`GENERAL_TASKS` and ten more kinds of request: the wider pool (``wider=True``) of the
second round of SmolLM2 training text. The first pool stays as it was, so the held-out prompts
the drafters are evaluated on, and the first round's text, are reproduced unchanged."""

_MORE_FILLERS: dict[str, tuple[str, ...]] = {
    "topic": ("artificial intelligence", "nutrition", "the Renaissance", "quantum computing", "the economy",
              "magnetism", "the periodic table", "plate tectonics", "photography", "the human skeleton",
              "cloud computing", "meditation", "the speed of light", "ancient Egypt", "probability", "poetry",
              "the Industrial Revolution", "supply and demand", "the food chain", "bitcoin", "the carbon cycle",
              "operating systems", "the metric system", "recursion", "global warming", "the seasons"),
    "activity": ("baking bread", "learning to draw", "writing a resume", "preparing for a job interview",
                 "starting a small business", "learning chess", "hiking", "meditating", "painting", "doing yoga",
                 "learning Python", "eating healthy", "sleeping better", "writing poetry", "teaching kids to read",
                 "organizing a closet", "planning a trip", "riding a bike", "learning to sing", "making new habits"),
    "thing": ("sharks", "volcanoes", "the Moon", "dolphins", "chocolate", "pyramids", "tigers", "rainforests",
              "snowflakes", "jellyfish", "the Pacific ocean", "giraffes", "mushrooms", "bats", "comets", "koalas"),
    "a_thing": ("a rabbit", "a turtle", "a lion", "a parrot", "a dragon", "a mouse", "an elephant", "a whale",
                "a squirrel", "a penguin", "a computer", "a train", "a boat", "a duck", "a goat"),
    "part": ("fins", "toes", "ears", "doors", "strings", "keys"),
    "code_task": ("reverses the words in a sentence", "counts the words in a text", "checks whether a year is a leap year",
                  "returns the greatest common divisor of two numbers", "converts a binary string to an integer",
                  "finds all even numbers in a list", "computes the area of a circle", "generates a random password",
                  "checks whether a list is sorted", "rotates a list by k positions", "finds the longest word in a sentence",
                  "computes the median of a list", "implements a simple queue", "parses a CSV line into fields",
                  "computes the power of a number without using **", "returns the unique characters of a string"),
}

WIDER_GENERAL_FILLERS: dict[str, tuple[str, ...]] = {
    **{key: values + _MORE_FILLERS.get(key, ()) for key, values in GENERAL_FILLERS.items()},
    "topic2": ("weather", "climate", "a virus", "bacteria", "a planet", "a star", "a list", "a tuple", "speed",
               "velocity", "a loan", "a mortgage", "a lake", "a river", "a comet", "an asteroid", "a noun", "a verb"),
    "error": ("IndexError: list index out of range", "KeyError: 'name'", "TypeError: 'int' object is not iterable",
              "ZeroDivisionError: division by zero", "NameError: name 'x' is not defined",
              "AttributeError: 'NoneType' object has no attribute 'split'", "ValueError: invalid literal for int()",
              "RecursionError: maximum recursion depth exceeded", "ModuleNotFoundError: No module named 'numpy'"),
}
"""What :data:`WIDER_GENERAL_TASKS` are filled with: :data:`GENERAL_FILLERS` with more entries
in every list (appended, in the same key order) and two new lists."""


# -- tokenizer and chat template ------------------------------------------------------------


def load_tokenizer(target_path: str | Path) -> Any:
    """The target's ``tokenizer.json`` through the ``tokenizers`` library (no transformers)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(Path(target_path) / "tokenizer.json"))


def chat_template(target_path: str | Path) -> str | None:
    path = Path(target_path) / "tokenizer_config.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("chat_template")


def render_chat(template: str, messages: Sequence[dict], *, add_generation_prompt: bool = True) -> str:
    """The chat template rendered in jinja2's sandbox (templates are data, never code)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=list(messages), add_generation_prompt=add_generation_prompt)


# -- prompts ------------------------------------------------------------------------------------


def _documents(split: str) -> list[tuple[str, str]]:
    from specpath_engine.corpus import read_heldout_asset, stdlib_documents

    docs = stdlib_documents("train") if split == "train" else read_heldout_asset()
    return [(rel, text.decode("utf-8", errors="replace")) for rel, text in docs]


def code_snippets(split: str, n: int, *, seed: int, max_lines: int = 18) -> list[str]:
    """``n`` line-aligned slices (4..``max_lines`` lines) at random places of stdlib files."""
    docs = [d for d in _documents(split) if d[1].count("\n") > 12]
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        lines = rng.choice(docs)[1].splitlines()
        size = rng.randint(4, max_lines)
        start = rng.randrange(0, max(1, len(lines) - size))
        text = "\n".join(lines[start:start + size]).strip("\n")
        if len(text) > 40:
            out.append(text + "\n")
    return out


def _functions(rel: str, text: str, max_lines: int) -> list[dict]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.end_lineno is None:
            continue
        if not 3 <= node.end_lineno - node.lineno + 1 <= max_lines:
            continue
        body = lines[node.lineno - 1:node.end_lineno]
        indent = len(body[0]) - len(body[0].lstrip())
        source = "\n".join(line[indent:] for line in body)
        doc = ast.get_docstring(node) or ""
        bare = source
        if doc and isinstance(node.body[0], ast.Expr):
            first, last = node.body[0].lineno - node.lineno, node.body[0].end_lineno - node.lineno
            bare = "\n".join(s for i, s in enumerate(source.splitlines()) if not first <= i <= last)
        found.append({"name": node.name, "source": source, "bare": bare, "doc": doc,
                      "summary": doc.strip().split("\n")[0] if doc else "",
                      "module": rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")})
    return found


def chat_instructions(split: str, n: int, *, seed: int, max_lines: int = 25) -> list[str]:
    """``n`` user messages from :data:`CHAT_TASKS`, filled from random stdlib functions."""
    rng = random.Random(seed)
    docs = _documents(split)
    out: list[str] = []
    while len(out) < n:
        rel, text = rng.choice(docs)
        funcs = _functions(rel, text, max_lines)
        if not funcs:
            continue
        f = rng.choice(funcs)
        task = rng.choice(CHAT_TASKS)
        if ("{summary}" in task or "{doc}" in task) and len(f["summary"]) < 15:
            continue
        out.append(task.format(**f))
    return out


def general_instructions(split: str, n: int, *, seed: int, wider: bool = False) -> list[str]:
    """``n`` distinct everyday chat requests from :data:`GENERAL_TASKS` (``wider``: from
    :data:`WIDER_GENERAL_TASKS`); a request is held out when the hash of its text says so (1 in
    5), so the two splits never share one, whichever pool made them."""
    import hashlib

    rng = random.Random(seed)
    tasks, fillers = (WIDER_GENERAL_TASKS, WIDER_GENERAL_FILLERS) if wider else (GENERAL_TASKS, GENERAL_FILLERS)
    want_heldout = split == "heldout"
    out: list[str] = []
    seen: set[str] = set()
    for _ in range(200 * max(n, 1)):
        if len(out) == n:
            break
        task = rng.choice(tasks)
        text = task.format(**{k: rng.choice(v) for k, v in fillers.items()})
        text = text[0].upper() + text[1:]
        heldout = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16) % 5 == 0
        if heldout == want_heldout and text not in seen:
            seen.add(text)
            out.append(text)
    return out


def build_prompts(tokenizer: Any, template: str | None, *, split: str, num_code: int, num_chat: int, seed: int,
                  num_general: int = 0, max_prompt_tokens: int = 240, wider_general: bool = False) -> list[list[int]]:
    """Token ids of ``num_code`` code prompts then ``num_chat`` chat prompts about stdlib code and
    ``num_general`` everyday chat requests (templated; plain text when the checkpoint has no
    template; ``wider_general``: from the wider pool), each cut to ``max_prompt_tokens``."""
    prompts = [tokenizer.encode(s).ids[:max_prompt_tokens] for s in code_snippets(split, num_code, seed=seed)]
    messages = (chat_instructions(split, num_chat, seed=seed + 1)
                + general_instructions(split, num_general, seed=seed + 2, wider=wider_general))
    for message in messages:
        text = render_chat(template, [{"role": "user", "content": message}]) if template else message + "\n"
        ids = tokenizer.encode(text).ids
        if len(ids) > max_prompt_tokens:  # keep the generation prompt at the end
            ids = ids[:max_prompt_tokens // 2] + ids[-max_prompt_tokens // 2:]
        prompts.append(ids)
    return prompts


def corpus_token_counts(target_path: str | Path, *, num_code: int, num_chat: int, seed: int = 11,
                        cache: str | Path | None = None) -> torch.Tensor:
    """Token counts [vocab] of ``num_code`` stdlib slices and ``num_chat`` chat instructions
    (training split) under the target's tokenizer: a cheap, wider sample than the generated
    windows for ranking a reduced vocabulary (no model runs). ``cache``: a file to reuse."""
    tok = load_tokenizer(target_path)
    config = json.loads((Path(target_path) / "config.json").read_text())
    if cache is not None and Path(cache).is_file():
        return torch.load(cache)
    text = code_snippets("train", num_code, seed=seed, max_lines=60) + chat_instructions("train", num_chat, seed=seed + 1)
    ids = [i for e in tok.encode_batch(text) for i in e.ids]
    counts = torch.bincount(torch.tensor(ids, dtype=torch.int64), minlength=config["vocab_size"])
    if cache is not None:
        torch.save(counts, cache)
    return counts


# -- the target's continuations -------------------------------------------------------------------


def generation_model(target_path: str | Path, dtype: torch.dtype, quantization: str | None = None) -> Any:
    """The target loaded for :func:`generate` as the serving engine prepares it: in bf16 on a CPU
    that has it, fused and packed for the native kernels (every layer and the attention of a
    batch of requests in native calls; unprepared, the same model runs at about a third of the
    speed), or weight-only ``quantization`` as ``specpath run --quantization`` serves it. A
    float32 target stays as loaded (torch's kernels). Not for feature capture: its batched
    full-window forwards run best on torch's own matmuls over the plain weights."""
    from specpath_engine.llm import _inference_model
    from specpath_engine.model import LlamaModel
    from specpath_engine.packed_linear import packing_enabled

    model = LlamaModel.from_pretrained(target_path, dtype=dtype)
    return _inference_model(model, quantization, packed=quantization is None and packing_enabled(dtype, "cpu"))


def generate(target: Any, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, temperatures: Sequence[float],
             eos_token_ids: Sequence[int], seed: int, max_num_seqs: int = 32, max_model_len: int = 512,
             past_eos: Sequence[bool] | None = None) -> list[list[int]]:
    """Prompt + continuation ids of every prompt (stopping at EOS, kept as the last token; where
    ``past_eos[i]``, prompt ``i``'s goes on past EOS to ``max_new_tokens``)."""
    from specpath_engine.llm_engine import LLMEngine
    from specpath_engine.request import SamplingParams
    from specpath_engine.scheduler import SchedulerSettings

    engine = LLMEngine(target, scheduler=SchedulerSettings(max_num_seqs=max_num_seqs, max_num_batched_tokens=2048,
                                                         max_model_len=max_model_len),
                       eos_token_ids=tuple(eos_token_ids), seed=seed)
    params = [SamplingParams(temperature=temperatures[i % len(temperatures)], seed=seed * 100003 + i,
                             max_tokens=min(max_new_tokens, max_model_len - len(p) - 1),
                             ignore_eos=bool(past_eos and past_eos[i])) for i, p in enumerate(prompts)]
    requests, _ = engine.generate([list(p) for p in prompts], params)
    out = []
    for r in requests:
        ids = list(r.prompt_token_ids) + list(r.output_token_ids)
        if r.finish_reason == "stop" and eos_token_ids and (not ids or ids[-1] not in eos_token_ids):
            ids.append(eos_token_ids[0])
        out.append(ids)
    return out


def pack_windows(sequences: Sequence[Sequence[int]], window: int) -> torch.Tensor:
    """Sequences joined end to end and cut into ``[N, window]`` rows (the tail is dropped)."""
    stream = [t for s in sequences for t in s]
    n = len(stream) // window
    return torch.tensor(stream[:n * window], dtype=torch.int64).view(n, window)


# -- features and the target's top-k --------------------------------------------------------------


@torch.inference_mode()
def features_with_topk(target: Any, windows: torch.Tensor, layers: Sequence[int], *, k: int,
                       batch: int = 8) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``taps [N, W, len(layers), d]`` float16 (decoder-layer outputs before the final norm), and
    the target's top-``k`` next-token ids (int32) and probabilities (float16), ``[N, W, k]``."""
    taps, ids, probs = [], [], []
    positions = torch.arange(windows.shape[1])
    for i in range(0, windows.shape[0], batch):
        rows = windows[i:i + batch]
        out = target.forward(rows, positions, hidden_layers=tuple(layers))
        p = torch.softmax(out.logits.float(), dim=-1)
        top = p.topk(k, dim=-1)
        taps.append(out.hidden_states.to(torch.float16))
        ids.append(top.indices.to(torch.int32))
        probs.append(top.values.to(torch.float16))
    return torch.cat(taps), torch.cat(ids), torch.cat(probs)


def build_dataset(target_path: str | Path, data_dir: str | Path, layers: Sequence[int], *, num_code: int,
                  num_chat: int, heldout_code: int, heldout_chat: int, num_general: int = 0, heldout_general: int = 0,
                  window: int = 256, max_new_tokens: int = 192,
                  temperatures: Sequence[float] = (0.0, 0.0, 0.7), top_k: int = 8, seed: int = 0,
                  chunk: int = 48, dtype: torch.dtype = torch.bfloat16, max_num_seqs: int = 24,
                  raw_windows: int = 0, max_chunks: int | None = None, wider_general: bool = False,
                  log: Callable[[str], None] = print) -> Path:
    """Generate (chunk by chunk, resumable), pack, run the target, and write the cache in
    ``data_dir``; returns it. Held-out windows come first (``features.json``: ``heldout``).

    ``raw_windows`` adds windows of plain stdlib training text (no generation: a third of the
    cost per token). The recipes' labels are the target's own distributions at every position,
    so these still teach the target's predictions, on human-written inputs. ``max_chunks``
    generates only the first chunks of the (shuffled) training prompts: a time budget."""
    from specpath_engine.model import LlamaModel
    from specpath_train.trainer import file_digest

    data = Path(data_dir)
    data.mkdir(parents=True, exist_ok=True)
    if (data / "features.json").is_file():
        return data
    tok = load_tokenizer(target_path)
    template = chat_template(target_path)
    config = json.loads((Path(target_path) / "config.json").read_text())
    eos = config.get("eos_token_id")
    eos_ids = [eos] if isinstance(eos, int) else list(eos or ())
    generator = generation_model(target_path, dtype)
    torch.manual_seed(seed)
    parts: dict[str, list[list[int]]] = {}
    for split, n_code, n_chat, n_general, s in (("heldout", heldout_code, heldout_chat, heldout_general, seed + 7),
                                                ("train", num_code, num_chat, num_general, seed)):
        prompts = build_prompts(tok, template, split=split, num_code=n_code, num_chat=n_chat, num_general=n_general,
                                seed=s, wider_general=wider_general)
        order = list(range(len(prompts)))
        random.Random(s).shuffle(order)  # mix code and chat in every chunk
        prompts = [prompts[i] for i in order]
        limit = max_chunks if split == "train" else None
        parts[split] = _generated_chunks(generator, prompts, data, split, chunk=chunk, max_chunks=limit, seed=s,
                                         max_new_tokens=max_new_tokens, temperatures=temperatures,
                                         eos_ids=eos_ids, max_num_seqs=max_num_seqs, log=log)
    held = pack_windows(parts["heldout"], window)
    train = pack_windows(parts["train"], window)
    if raw_windows:
        text = "\n\n".join(code_snippets("train", 8 * raw_windows, seed=seed + 3, max_lines=60))
        raw = pack_windows([tok.encode(text).ids], window)[:raw_windows]
        log(f"data: {raw.shape[0]} windows of plain stdlib text")
        train = torch.cat([train, raw])
    train = train[torch.randperm(train.shape[0], generator=torch.Generator().manual_seed(seed))]
    windows = torch.cat([held, train])
    log(f"data: {held.shape[0]} held-out + {train.shape[0]} training windows x {window} tokens")
    del generator
    target = LlamaModel.from_pretrained(target_path, dtype=dtype)
    _feature_chunks(target, windows, layers, data, top_k=top_k, log=log)
    key = {"target": file_digest(Path(target_path) / "model.safetensors"), "layers": list(layers)}
    meta = {"key": key, "target_path": str(target_path), "heldout": int(held.shape[0]), "window": window,
            "top_k": top_k, "seed": seed, "dtype": str(dtype).removeprefix("torch."),
            "prompts": {"train": [num_code, num_chat, num_general], "heldout": [heldout_code, heldout_chat, heldout_general]},
            "sequences": {k: len(v) for k, v in parts.items()}, "raw_windows": raw_windows, "max_chunks": max_chunks, "chunk": chunk,
            "temperatures": list(temperatures), "max_new_tokens": max_new_tokens,
            "wider_general": wider_general}
    (data / "features.json").write_text(json.dumps(meta) + "\n")
    for f in list(data.glob("feat-*.safetensors")):
        f.unlink()
    return data


def _generated_chunks(target: Any, prompts: list[list[int]], data: Path, split: str, *, chunk: int,
                      max_chunks: int | None, seed: int, max_new_tokens: int, temperatures: Sequence[float],
                      eos_ids: list[int], max_num_seqs: int, log: Callable[[str], None]) -> list[list[int]]:
    """The target's continuations of ``prompts``, ``chunk`` prompts per file ``gen-{split}-NNNN.json``
    (a chunk already on disk is read, not generated again: the resumable part)."""
    seqs: list[list[int]] = []
    for c in range(0, len(prompts), chunk):
        if max_chunks is not None and c // chunk >= max_chunks:
            break
        path = data / f"gen-{split}-{c // chunk:04d}.json"
        if not path.is_file():
            t0 = time.time()
            got = generate(target, prompts[c:c + chunk], max_new_tokens=max_new_tokens, temperatures=temperatures,
                           eos_token_ids=eos_ids, seed=seed + c, max_num_seqs=max_num_seqs)
            path.write_text(json.dumps(got))
            new = sum(len(g) for g in got) - sum(len(p) for p in prompts[c:c + chunk])
            log(f"data: {split} chunk {c // chunk}: {len(got)} sequences, {new} new tokens in "
                f"{time.time() - t0:.0f}s ({new / max(time.time() - t0, 1e-9):.0f} tok/s)")
        seqs += json.loads(path.read_text())
    return seqs


def _feature_chunks(target: Any, windows: torch.Tensor, layers: Sequence[int], data: Path, *, top_k: int,
                    log: Callable[[str], None]) -> None:
    """The target's taps and top-k distributions over ``windows``, 64 windows per file
    ``feat-NNNN.safetensors`` (resumable like the generation), then written with the windows as
    one ``features.safetensors``, a chunk at a time (never the whole cache in memory)."""
    from safetensors.torch import save_file

    paths = []
    for c in range(0, windows.shape[0], 64):
        path = data / f"feat-{c // 64:04d}.safetensors"
        if not path.is_file():
            t0 = time.time()
            taps, ids, probs = features_with_topk(target, windows[c:c + 64], layers, k=top_k)
            save_file({"taps": taps.contiguous(), "topk_ids": ids.contiguous(), "topk_probs": probs.contiguous()}, str(path))
            n = windows[c:c + 64].numel()
            log(f"data: features {c // 64}: {n} tokens in {time.time() - t0:.0f}s ({n / (time.time() - t0):.0f} tok/s)")
        paths.append(path)
    write_features(data / "features.safetensors", windows, paths)


def write_features(out: Path, windows: torch.Tensor, parts: Sequence[Path]) -> None:
    """The feature cache ``out``: ``windows`` as ``tokens`` and the ``parts``' taps and top-k,
    concatenated in order, written a part at a time (never the whole cache in memory)."""
    from specpath_train.tensorfile import mapped, write_streamed

    first = mapped(parts[0])
    tensors = {"tokens": (torch.int32, tuple(windows.shape), lambda: iter([windows.to(torch.int32)]))}
    for name in ("taps", "topk_ids", "topk_probs"):
        shape = (windows.shape[0], *first[name].shape[1:])
        tensors[name] = (first[name].dtype, shape, lambda name=name: (mapped(p)[name] for p in parts))
    write_streamed(out, tensors)


def load_dataset(data_dir: str | Path, layers: Sequence[int]) -> dict[str, Any]:
    """``tokens``, ``taps`` (the asked ``layers``, in order), ``topk_ids``, ``topk_probs`` and
    ``heldout`` (how many leading windows are held out) from :func:`build_dataset`'s cache. The
    taps of every layer stay in the file (:func:`specpath_train.tensorfile.mapped`), so caches
    larger than memory train; a subset of the layers is copied out."""
    from specpath_train.tensorfile import mapped

    data = Path(data_dir)
    meta = json.loads((data / "features.json").read_text())
    have = meta["key"]["layers"]
    missing = [i for i in layers if i not in have]
    if missing:
        raise ValueError(f"{data}: the cache holds layers {have}, not {missing}")
    pick = [have.index(i) for i in layers]
    t = mapped(data / "features.safetensors")
    taps = t["taps"]  # [N, W, layers, d], a view of the file: read as training indexes it
    if pick != list(range(len(have))):  # a subset of the layers, copied a slice of windows at a time
        n, w, _, d = taps.shape
        sub = torch.empty((n, w, len(pick), d), dtype=taps.dtype)
        for start in range(0, n, 256):
            sub[start:start + 256] = taps[start:start + 256][:, :, pick]
        taps = sub
    return {"tokens": t["tokens"].long(), "taps": taps, "topk_ids": t["topk_ids"].long(),
            "topk_probs": t["topk_probs"].float(), "heldout": int(meta["heldout"]), "meta": meta}


def merge_datasets(parts: Sequence[str | Path], out: str | Path, *, layers: Sequence[int] | None = None,
                   heldout: str = "all") -> Path:
    """One cache from several :func:`build_dataset` caches of the same target (shards built by
    parallel processes, or the data of earlier runs beside a new one): held-out windows first,
    then the training windows, part by part. ``layers``: keep these taps (every part must hold
    them; default: the parts' common layer list). ``heldout``: ``"all"`` keeps every part's
    held-out windows held out; ``"first"`` keeps only the first part's and leaves the others'
    out (they measured earlier runs, not this one). The merged file is written 128 windows at a
    time (:func:`specpath_train.tensorfile.write_streamed`): its size is bounded by the disk, not
    by memory."""
    from specpath_train.tensorfile import mapped, write_streamed

    if heldout not in ("all", "first"):
        raise ValueError(f"heldout={heldout!r}: 'all' or 'first'")
    if not parts:
        raise ValueError("no data directories to merge")
    metas = []
    for d in parts:
        meta_path = Path(d) / "features.json"
        if not meta_path.is_file() or not (Path(d) / "features.safetensors").is_file():
            raise ValueError(f"{d}: not a finished data directory (no features.json and features.safetensors)")
        metas.append(json.loads(meta_path.read_text()))
    if len({m["key"]["target"] for m in metas}) != 1:
        raise ValueError("the data directories were made by different targets (features.json key.target differs)")
    if len({m["key"].get("quantization") for m in metas}) != 1:
        raise ValueError("the data directories were captured from differently quantised targets "
                         "(features.json key.quantization differs)")
    if len({m.get("window") for m in metas}) != 1:
        raise ValueError("the data directories hold windows of different lengths")
    have = [m["key"]["layers"] for m in metas]
    keep = list(layers) if layers is not None else have[0]
    for d, h in zip(parts, have):
        if not set(keep) <= set(h):
            raise ValueError(f"{d}: holds layers {h}, not {sorted(set(keep) - set(h))}")
    held = [int(m["heldout"]) if heldout == "all" or i == 0 else 0 for i, m in enumerate(metas)]
    start = [int(m["heldout"]) for m in metas]  # where each part's training windows begin
    files = [mapped(Path(d) / "features.safetensors") for d in parts]
    counts = [f["tokens"].shape[0] for f in files]
    total = sum(held) + sum(c - s for c, s in zip(counts, start))

    def slices(name: str):
        """The merged tensor's rows in order: the held-out windows of the parts that keep
        theirs, then every part's training windows, 128 windows at a time."""
        for phase in ("heldout", "train"):
            for f, h, s, c, have_i in zip(files, held, start, counts, have):
                lo, hi = (0, h) if phase == "heldout" else (s, c)
                pick = [have_i.index(i) for i in keep]
                for a in range(lo, hi, 128):
                    t = f[name][a:min(a + 128, hi)]
                    yield t[:, :, pick] if name == "taps" and pick != list(range(len(have_i))) else t

    shapes = {}
    for name in ("tokens", "taps", "topk_ids", "topk_probs"):
        shape = list(files[0][name].shape)
        shape[0] = total
        if name == "taps":
            shape[2] = len(keep)
        shapes[name] = (files[0][name].dtype, shape, lambda name=name: slices(name))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_streamed(out / "features.safetensors", shapes)
    meta = {**metas[0], "key": {**metas[0]["key"], "layers": keep}, "heldout": sum(held),
            "parts": [{"path": str(d), "windows": c, **m} for d, c, m in zip(parts, counts, metas)],
            "parts_heldout": heldout}
    (out / "features.json").write_text(json.dumps(meta) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m specpath_train.target_text --target DIR --out DATA_DIR --layers 1 14 26 29``"""
    import argparse

    from specpath_train.trainer import start_run

    p = argparse.ArgumentParser(description="Build a drafter training set from a target's own text")
    p.add_argument("--target", required=True, help="HF checkpoint dir with tokenizer.json")
    p.add_argument("--out", required=True, help="data directory (resumable)")
    p.add_argument("--layers", type=int, nargs="+", required=True, help="0-based decoder-layer outputs to keep")
    p.add_argument("--code", type=int, default=480, help="training code prompts")
    p.add_argument("--chat", type=int, default=480, help="training chat prompts")
    p.add_argument("--heldout-code", type=int, default=24)
    p.add_argument("--heldout-chat", type=int, default=24)
    p.add_argument("--general", type=int, default=0, help="training everyday chat requests (GENERAL_TASKS)")
    p.add_argument("--heldout-general", type=int, default=0)
    p.add_argument("--wider-general", action="store_true", help="everyday requests from WIDER_GENERAL_TASKS")
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--max-new-tokens", type=int, default=192)
    p.add_argument("--top-k", type=int, default=8)
    p.add_argument("--chunk", type=int, default=48, help="prompts per generation chunk (one file each)")
    p.add_argument("--max-num-seqs", type=int, default=24)
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    p.add_argument("--raw-windows", type=int, default=0, help="extra windows of plain stdlib text")
    p.add_argument("--max-chunks", type=int, default=None, help="generate only this many training chunks")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    _, log = start_run(args)
    log(f"target_text: {vars(args)}")
    build_dataset(args.target, args.out, args.layers, num_code=args.code, num_chat=args.chat,
                  heldout_code=args.heldout_code, heldout_chat=args.heldout_chat, num_general=args.general,
                  heldout_general=args.heldout_general, window=args.window,
                  max_new_tokens=args.max_new_tokens, top_k=args.top_k, seed=args.seed, chunk=args.chunk,
                  dtype=getattr(torch, args.dtype), max_num_seqs=args.max_num_seqs,
                  raw_windows=args.raw_windows, max_chunks=args.max_chunks, wider_general=args.wider_general, log=log)
    log("target_text: done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
