"""The ``specpath`` command: inspect methods and plugins, explain and validate configs.

Core subcommands live here. Other distributions add theirs through the ``specpath.commands``
entry-point group (:data:`COMMANDS_GROUP`): each names a module exposing
``add_subcommands(subparsers)``, which adds its parsers with ``set_defaults(func=handler)``
where ``handler(args) -> int``. A command of :data:`OTHER_COMMANDS` whose distribution is
missing (or broken) stays in place, saying what to install. Every error is one line on
stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from specpath.errors import InputError, PluginError, SpeculativeConfigError

COMMANDS_GROUP = "specpath.commands"
"""Entry-point group of command modules from other distributions."""

OTHER_COMMANDS: dict[str, str] = {
    "run": "specpath-engine",
    "demo": "specpath-engine",
    "convert": "specpath-engine",
    "bench": "specpath-engine",
    "train": "specpath-train",
    "export": "specpath-train",
}
"""Command -> the distribution that provides it (so that a missing one can say what to install)."""


PROBE_K = 4
"""K at which ``specpath methods`` evaluates K-dependent values."""

METHOD_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("reads target hidden states", "uses_target_hidden_states", "the drafter reads the target's hidden states"),
    ("separate workspace", "uses_separate_workspace_lane",
     "drafts run in a workspace of their own instead of adding rows to the target batch"),
    ("lookahead KV", "num_lookahead_tokens", "target-side KV positions reserved per request"),
    ("extra draft slots", "max_num_new_slots_for_drafting", "query rows the drafter adds to the target batch"),
    ("own vocab", "draft_has_own_vocab", "the drafter has its own vocabulary (else the target's)"),
    ("PCP", "supports_pcp", "works with prefill context parallelism"),
    ("tail-block drop", "draft_kv_depends_on_next_token",
     "draft KV at position p depends on the token after p, so a prefix-cache tail block is dropped"),
)
"""``specpath methods``' capability columns: header (as in docs/methods/index.md), row key, meaning."""

CAPABILITY_KEYS = frozenset(key for _, key, _ in METHOD_COLUMNS if not key.startswith(("num_", "max_")))


class CommandError(Exception):
    """A usage error, printed as ``<prog>: error: <message>`` (prog: ``specpath`` or ``specpath run``);
    other distributions' command handlers raise it too."""

    def __init__(self, message: str, prog: str = "specpath") -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 1 (argparse's default is usage + 2)
        raise CommandError(message, prog=self.prog)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, default=str))


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths)).rstrip()]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


# -- methods -------------------------------------------------------------------------------


def _probe(config_cls: type, k: int = PROBE_K) -> Any:
    """An instance of ``config_cls`` over a stand-in spec with every field at its default
    and K = ``k``, for listing values that depend on K."""
    import types

    import attrs

    from specpath.config.speculative import SpeculativeConfig

    fields = {f.name: f.default for f in attrs.fields(SpeculativeConfig) if f.init}
    fields.update(num_speculative_tokens=k, method=config_cls.base_method)
    spec = types.SimpleNamespace(**fields)
    spec.use_eagle_block_drop = lambda: False
    return config_cls(spec=spec)


def method_rows() -> list[dict[str, Any]]:
    """One row per built-in method (installed or not) and per registered custom method."""
    from specpath import plugins
    from specpath.config.speculator import CAPABILITY_FLAGS
    from specpath.methods import CANONICAL_METHODS, METHOD_DISTRIBUTIONS, MTP_ALIASES, UNIMPLEMENTED_METHODS
    from specpath.registry import get_registry

    plugins.load_all()
    registry = get_registry()
    names = list(CANONICAL_METHODS) + [n for n in registry.names() if n not in CANONICAL_METHODS]
    names += sorted({b.name for b in plugins.broken_plugins()} - set(names))  # a broken plugin is a row too
    rows = []
    for name in names:
        reg = registry.get(name)
        broken = [b for b in plugins.broken_plugins() if b.name == name]
        row: dict[str, Any] = {
            "name": name,
            "builtin": name in CANONICAL_METHODS,
            "base_method": name if name in CANONICAL_METHODS else (reg.config_class.base_method if reg else None),
            "aliases": sorted(MTP_ALIASES) if name == "mtp" else (["[ngram]"] if name == "ngram" else []),
            "distribution": (reg.distribution if reg and reg.distribution else METHOD_DISTRIBUTIONS.get(name))
            or (broken[0].distribution if broken else None),
            "installed": reg is not None,
            "config_class": None if reg is None else reg.config_class.qualname(),
            "registered_by": None if reg is None else reg.origin,
        }
        for flag in CAPABILITY_FLAGS:
            row[flag] = None if reg is None else bool(getattr(reg.config_class, flag))
        row["num_lookahead_tokens"] = row["max_num_new_slots_for_drafting"] = None
        row["num_prefill_lookahead_tokens"] = None
        if reg is not None:
            try:
                probe = _probe(reg.config_class)
                row["num_lookahead_tokens"] = probe.num_lookahead_tokens
                row["max_num_new_slots_for_drafting"] = probe.max_num_new_slots_for_drafting
                row["num_prefill_lookahead_tokens"] = probe.num_prefill_lookahead_tokens
            except Exception:  # noqa: BLE001 - some values need a real draft checkpoint
                pass
        if reg is None and broken:
            row["note"] = f"plugin {broken[0].distribution or broken[0].name} is broken: {broken[0].error}"
        elif broken:  # bound by its owner; another distribution's plugin of this name failed
            row["note"] = f"another plugin of this name ({broken[0].distribution}) is broken: {broken[0].error}"
        elif reg is None and name in UNIMPLEMENTED_METHODS:
            row["note"] = UNIMPLEMENTED_METHODS[name]
        elif reg is None:
            from specpath.methods import install_hint

            row["note"] = f"not installed: {install_hint(row['distribution'])}"
        rows.append(row)
    return rows


def cmd_methods(args: argparse.Namespace) -> int:
    from specpath.verification import LOSSY_METHODS as LOSSY_REJECTION_SAMPLE_METHODS

    rows = method_rows()
    if args.json:
        _print_json(rows)
        return 0

    def yn(v: Any) -> str:
        return "-" if v is None else ("yes" if v else "no")

    def cell(r: dict[str, Any], key: str) -> str:
        v = r[key]
        return (yn(v) if key in CAPABILITY_KEYS else str(v)) if v is not None else "-"

    table = [
        [r["name"], r["distribution"] or "-", "yes" if r["installed"] else "NO",
         (r["config_class"] or "-").rpartition(":")[2], *(cell(r, key) for _, key, _ in METHOD_COLUMNS)]
        for r in rows
    ]
    header = ["method", "distribution", "installed", "config class", *(h for h, _, _ in METHOD_COLUMNS)]
    print(_table(table, header))
    print(f"columns (K = num_speculative_tokens = {PROBE_K} here; docs/methods/index.md has the same table):")
    for head, key, meaning in METHOD_COLUMNS:
        print(f"  {head}: {meaning} ({key})")
    for r in rows:
        if not r.get("note"):
            continue
        print(f"  {r['name']}: {r['note']}")
    print(
        "verification modes: standard (lossless), block (lossless), "
        + ", ".join(f"{m} (LOSSY)" for m in sorted(LOSSY_REJECTION_SAMPLE_METHODS))
    )
    return 0


# -- plugins -------------------------------------------------------------------------------


def cmd_plugins(args: argparse.Namespace) -> int:
    from specpath import plugins

    plugins.load_all()
    records = [r.as_dict() for r in plugins.plugin_records()]
    if args.json:
        _print_json(records)
        return 0
    if not records:
        print(f"no plugins in the {plugins.GROUP!r} entry-point group")
        return 0
    table = [
        [r["name"], r["distribution"] or "(in-process)", r["version"] or "-", r["status"], ",".join(r["methods"]) or "-",
         r["error"] or ""]
        for r in records
    ]
    print(_table(table, ["entry point", "distribution", "version", "status", "methods", "error"]))
    return 0


# -- fields --------------------------------------------------------------------------------


def cmd_fields(args: argparse.Namespace) -> int:
    from specpath.config.fields import FIELD_GROUPS, field_reference

    rows = field_reference()
    if args.json:
        _print_json(rows)
        return 0
    for group, title in FIELD_GROUPS.items():
        print(f"{title}:")
        for r in (r for r in rows if r["group"] == group):
            default = "" if r["default"] is None else f" = {r['default']!r}"
            print(f"  {r['name']}: {r['type']}{default}")
            print(f"      {r['doc']}")
    return 0


# -- explain / validate ----------------------------------------------------------------------


def _resolve(args: argparse.Namespace) -> Any:
    from specpath.config.args import from_namespace
    from specpath.config.model import ModelConfig, ParallelConfig

    target = None
    if args.model is not None:
        target = ModelConfig(model=args.model, trust_remote_code=args.trust_remote_code)
    elif args.trust_remote_code:  # never silently ignored: the trust travels with the embedded default target
        target = ModelConfig(model="embedded", trust_remote_code=True)
    parallel = ParallelConfig(
        tensor_parallel_size=args.tensor_parallel_size,
        data_parallel_size=args.data_parallel_size,
    )
    spec = from_namespace(args, target_model_config=target, target_parallel_config=parallel)
    if spec is None:
        raise SpeculativeConfigError(
            "nothing to resolve: give --speculative-config or --spec-method/--spec-model/--spec-tokens",
            field="--speculative-config",
        )
    return spec


def explain_data(spec: Any) -> dict[str, Any]:
    from specpath.config.applied import describe_overrides

    speculator = spec.speculator_config
    return {
        "steps": [{"step": s, "detail": d} for s, d in spec.resolution_trace],
        "method": spec.method,
        "custom_method": spec.custom_method,
        "num_speculative_tokens": spec.num_speculative_tokens,
        "speculator": speculator.describe(),
        "lossy": spec.is_lossy,
        "draft_model": None if spec.draft_model_config is None else spec.draft_model_config.model,
        "hash": spec.compute_hash(),
        "config": spec.to_dict(),
        "draft_overrides": describe_overrides(spec),
    }


def cmd_explain(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = _resolve(args)
    data = explain_data(spec)
    data["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    if args.json:
        _print_json(data)
        return 0
    for i, step in enumerate(data["steps"], 1):
        print(f"{i:2d}. {step['step']:<14} {step['detail']}")
    described = data["speculator"]
    print(f"config class:   {described['config_class']}")
    print(f"speculator:     {described['speculator_class']}")
    flags = [k for k, v in described.items() if v is True]
    print(f"flags:          {', '.join(flags) or '-'}")
    print(
        f"lookahead:      {described['num_lookahead_tokens']} KV slots/request; prefill lookahead "
        f"{described['num_prefill_lookahead_tokens']}"
    )
    print(f"extra slots:    {described['max_num_new_slots_for_drafting']} per request (drafter side)")
    print(f"verification:   {spec.rejection_sample_method}{' (LOSSY)' if spec.is_lossy else ''}")
    print(f"draft length:   {_draft_length(spec)}")
    if not described.get("model_free"):
        print(f"drafter weights: {_drafter_weights(spec, described)}")
    if "draft_shape" in described:
        print(f"drafts:         {described['draft_shape']}")
    from specpath.config.applied import NO_ENGINE

    for engine, rows in data["draft_overrides"].items():
        if engine == NO_ENGINE:
            print("overrides:      no engine installed; one that cannot apply a value does this")
        else:
            print(f"overrides:      as the {engine} engine applies them")
        for row in rows:
            requested = "-" if row["requested"] is None else row["requested"]
            note = f": {row['note']}" if row["note"] else ""
            print(f"  {row['field']:<18} {requested} -> {row['resolved']} ({row['outcome']}{note})")
    print(f"hash:           {data['hash']}")
    for note in described.get("notes") or ():
        print(f"note:           {note}")
    for w in data["warnings"]:
        print(f"warning:        {w}")
    return 0


def _drafter_weights(spec: Any, described: Mapping[str, Any]) -> str:
    """What the drafter's matrices are multiplied in: the config's ``quantization``, the shipped
    drafter's default (where the engine runs it natively), or as loaded."""
    if spec.quantization == "none":
        return "as loaded (speculative_config.quantization none)"
    if spec.quantization is not None:
        return f"{spec.quantization} (speculative_config.quantization)"
    default = described.get("shipped_drafter_quantization")
    if default:
        return (f"{default} weight-only, the shipped drafter's default where the engine multiplies it natively "
                "(the reference engine: a bf16 target on a CPU with its native kernels), else as loaded; "
                "quantization none keeps the weights as loaded")
    return "as loaded"


def cmd_validate(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = _resolve(args)
    print(f"ok: method={spec.custom_method or spec.method} K={spec.num_speculative_tokens} "
          f"class={type(spec.speculator_config).__name__}")
    return 0


def _add_resolve_args(parser: argparse.ArgumentParser) -> None:
    from specpath.config.args import add_speculative_args

    add_speculative_args(parser)
    parser.add_argument("--model", help="target model the config is resolved against: a Hugging Face checkpoint "
                        "directory, a .gguf file, a named model (e.g. smollm2-135m) or 'embedded'; default: the "
                        "embedded model (shipped drafters and defaults follow it)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow code named by the configuration (custom_class proposers, checkpoint-declared classes)")
    parser.add_argument("--tensor-parallel-size", type=int, default=1,
                        help="the target's tensor-parallel size (the draft's defaults to it; default 1)")
    parser.add_argument("--data-parallel-size", type=int, default=1, help="the target's data-parallel size (default 1)")


def _draft_length(spec: Any) -> str:
    """What ``explain`` says of the draft-length policy (the engine applies it; see draft_governor)."""
    k = spec.num_speculative_tokens
    if spec.draft_length_policy == "fixed" or spec.rejection_sample_method == "synthetic":
        why = " (synthetic verification: preset acceptance, nothing to adapt to)" if spec.draft_length_policy != "fixed" else ""
        return f"fixed: up to K={k} every step{why}"
    shape = "all K in one pass" if spec.speculator_config.drafts_in_one_pass else "one token a pass"
    if spec.draft_pass_cost is not None:
        cost = (f"a drafter pass pinned at {spec.draft_pass_cost:g} of a measured plain target step "
                "(configured), the target's costs measured")
    elif spec.speculator_config.model_free:
        cost = "drafter and target costs measured (prior: a model-free drafter costs next to nothing)"
    else:
        cost = ("drafter and target costs measured (prior: the drafter's weight bytes over the target's, "
                "scaled by the measured plain step)")
    from specpath.catch_up import catch_up_window

    window = catch_up_window(spec)
    if window:
        cost += (f"; a drafter catching up on a request after a back-off is handed at most its newest "
                 f"{window} positions (catch_up_window; a prompt is handed over whole)")
    return (f"adaptive: from measured costs per batch: 0..{k} per request and step, chosen for the "
            f"whole batch to maximise expected tokens per second from each request's running acceptance, "
            f"plain decoding where drafting does not pay (lossless); drafts {shape}; {cost}; "
            "drafts that would open another block of target rows (AMX tiles: 16) are weighed against fewer; "
            "above batch 1 a step drafts only where it is expected to beat a plain step by 6% and not to "
            "slow the batch's laggard (fewest tokens generated); "
            "from 4 requests each decode step runs one of three arms, no drafts, one draft a request, or that "
            "allocation, whichever has delivered most tokens per second lately (a drafting arm only where it beats "
            "plain steps by 3%; the others tried now and then; step_costs batch_arms); "
            "a guard backs the whole engine off where drafting steps deliver fewer tokens per second "
            "than plain ones at the same batch size (above batch 1: not 6% more), bar a rare exploration "
            "burst (step_costs guard_*); "
            "draft_length_policy='fixed' always drafts K; metrics: num_backoff_steps, step_costs")


def _missing(reason: str) -> Any:
    def handler(args: argparse.Namespace) -> int:
        raise CommandError(f"not available ({reason})", prog=f"specpath {args.command}")

    return handler


def _add_command_modules(sub: Any) -> None:
    """Every ``specpath.commands`` module's subcommands; stand-ins saying what to install for
    the :data:`OTHER_COMMANDS` none of them added."""
    from importlib import metadata

    broken: dict[str, str] = {}
    for entry_point in sorted(metadata.entry_points(group=COMMANDS_GROUP), key=lambda ep: ep.name):
        dist = entry_point.dist.name if entry_point.dist is not None else entry_point.value
        try:
            entry_point.load().add_subcommands(sub)
        except Exception as exc:  # noqa: BLE001 - a missing or broken module must not break the CLI
            text = " ".join(str(exc).split()) or type(exc).__name__
            broken[dist] = f"{entry_point.value} cannot be imported: {text}"
    for command, dist in OTHER_COMMANDS.items():
        if command in sub.choices:
            continue
        from specpath.methods import install_hint

        reason = broken.get(dist) or f"{dist} is not installed: {install_hint(dist)}"
        # prefix_chars no argument starts with: every argument lands in ``rest``, so the answer is
        # what to install, never an "unrecognized arguments" error about the real command's flags
        q = sub.add_parser(command, help=f"(not available: {reason})", add_help=False, prefix_chars="\0")
        q.add_argument("rest", nargs=argparse.REMAINDER)
        q.set_defaults(func=_missing(reason))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="specpath", description="Speculative decoding: methods, plugins and configs.")
    parser.add_argument("--version", action="version", version=f"specpath {__import__('specpath').__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("methods", help="capability table of every built-in and registered method")
    p.add_argument("--json", action="store_true", help="print one JSON list of rows, every capability flag included")
    p.set_defaults(func=cmd_methods)

    p = sub.add_parser("plugins", help="installed method plugins and their status")
    p.add_argument("--json", action="store_true", help="print one JSON list of plugin records")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("fields", help="every speculative-config field, by group, with its documentation")
    p.add_argument("--json", action="store_true", help="print one JSON list of fields (group, name, type, default, doc)")
    p.set_defaults(func=cmd_fields)

    p = sub.add_parser("explain", help="resolve a speculative config and show every step")
    _add_resolve_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object: steps, flags, config and hash")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("validate", help="exit 0 if a speculative config resolves, else 1 with the error")
    _add_resolve_args(p)
    p.set_defaults(func=cmd_validate)

    from specpath import scaffold

    scaffold.add_subcommands(sub)
    _add_command_modules(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``specpath`` command."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help()
            return 1
        return int(args.func(args) or 0)
    except (SpeculativeConfigError, PluginError, InputError, CommandError) as exc:
        prog = exc.prog if isinstance(exc, CommandError) else "specpath"
        print(f"{prog}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # pragma: no cover - e.g. `specpath methods | head`
        return 0
    except Exception as exc:  # noqa: BLE001 - never a raw traceback; SPECPATH_DEBUG=1 shows it
        import os

        if os.environ.get("SPECPATH_DEBUG"):
            raise
        text = " ".join(str(exc).split())
        print(f"specpath: error: {type(exc).__name__}: {text} (SPECPATH_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
