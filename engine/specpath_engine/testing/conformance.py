"""The conformance suite every method plugin runs: subclass one class, name your method.

.. code-block:: python

    from specpath_engine.testing import SpeculatorConformance
    from specpath_mine.config import MineSpeculatorConfig

    class TestMine(SpeculatorConformance):
        method = "mine"
        config_class = MineSpeculatorConfig
        expected = {"num_lookahead_tokens": lambda k: 0,
                    "max_num_new_slots_for_drafting": lambda k: 0,
                    "num_prefill_lookahead_tokens": lambda k: 0}
        valid_options = [{"speculator_options": {"depth": 2}}]
        invalid_options = [({"speculator_options": {"depth": 0}}, "depth")]
        known_failures = {}   # {"test_name": "why"}: runs as a strict xfail

Each test reads the class's capability flags and skips only what the method declares it
cannot do (no ``speculator_class`` -> no proposal tests; ``reference_engine = "reason"`` ->
no engine test). A name in ``known_failures`` must fail: when it passes, the strict xfail
reports it, so the declaration is removed as soon as the bug is fixed.

This module imports pytest; it is imported only by plugin tests, never by ``specpath``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, ClassVar

import pytest

from specpath.testing.hooks import check_plugin_hooks
from specpath_engine.testing.synthetic import DEFAULT_HIDDEN_SIZE, drive_speculator

ENTRY_POINT_GROUP = "specpath.methods"
_FRESH_PROCESS_RESULTS: dict[tuple[type, int], dict[str, Any]] = {}

# Example non-empty values for the method-specific options; a plugin that does not declare an
# option in ``supported_options`` must refuse it. Options the core adds later get a value
# guessed from their declared type (see :func:`method_specific_option_examples`).
METHOD_SPECIFIC_OPTION_EXAMPLES: dict[str, Any] = {
    "dspark_draft_topk": 4,
    "dspark_anchor_sampling": True,
    "draft_lm_head_quantization": "fp8",
    "index_share_for_mtp_iteration": True,
    "xpress_topc": 4,
    "draft_tree_topk": 2,
    "suffix_decoding_max_tree_depth": 8,
    "suffix_decoding_max_cached_requests": 16,
    "suffix_decoding_max_spec_factor": 1.5,
    "suffix_decoding_min_token_prob": 0.2,
    "speculator_options": {"conformance_probe": 1},
    "parallel_drafting": True,
    "prompt_lookup_min": 3,
    "prompt_lookup_max": 3,
    "eagle_aux_hidden_state_layer_ids": [0],
    "disable_eagle_block_drop": True,
    "enable_adaptive_verification": True,
    "adaptive_verification_threshold": 0.5,
    "suffix_decoding_max_tree_depth": 4,
}


def method_specific_option_examples() -> dict[str, Any]:
    """A valid, non-empty value for every option in the core's ``METHOD_SPECIFIC_OPTIONS``."""
    import re

    import attrs

    from specpath.config.speculative import METHOD_SPECIFIC_OPTIONS, SpeculativeConfig

    fields = {f.name: f for f in attrs.fields(SpeculativeConfig)}
    out = {}
    for name in METHOD_SPECIFIC_OPTIONS:
        if name in METHOD_SPECIFIC_OPTION_EXAMPLES:
            out[name] = METHOD_SPECIFIC_OPTION_EXAMPLES[name]
            continue
        declared = str(fields[name].type)
        literal = re.search(r"Literal\[['\"]([^'\"]+)", declared)
        out[name] = (literal.group(1) if literal else True if "bool" in declared else 4 if "int" in declared
                     else {"conformance_probe": 1} if "Mapping" in declared or "dict" in declared else "probe")
    return out


def _strict_xfail(test: Callable[..., Any], reason: str) -> Callable[..., Any]:
    """A copy of ``test`` marked strict-xfail (the base class's function stays unmarked)."""

    @functools.wraps(test)
    def declared_failure(self, *args: Any, **kwargs: Any) -> Any:
        return test(self, *args, **kwargs)

    declared_failure.pytestmark = [  # type: ignore[attr-defined]
        m for m in getattr(test, "pytestmark", []) if m.name != "xfail"
    ]
    return pytest.mark.xfail(reason=f"declared known failure: {reason}", strict=True)(declared_failure)


class SpeculatorConformance:
    """Base class of a plugin's conformance tests. Set the class attributes below."""

    __test__ = False  # not itself a test class; see __init_subclass__

    method: ClassVar[str]
    """The method name: the entry-point name in the ``specpath.methods`` group."""
    config_class: ClassVar[type]
    """The ``SpeculatorConfig`` subclass the method resolves to."""
    distribution: ClassVar[str | None] = None
    """The distribution that provides the entry point (checked when given)."""
    base_config: ClassVar[Mapping[str, Any]] = {}
    """Extra ``speculative_config`` fields the method needs to resolve (e.g. ``model``)."""
    k_values: ClassVar[Sequence[int]] = (1, 2, 3, 5, 8)
    """The ``num_speculative_tokens`` values the property and proposal tests use."""
    expected: ClassVar[Mapping[str, Callable[[int], int]]] = {}
    """What the plugin declares for each K: ``{"num_lookahead_tokens": lambda k: k, ...}``.
    Any of ``num_lookahead_tokens``, ``max_num_new_slots_for_drafting``,
    ``num_prefill_lookahead_tokens``."""
    expected_flags: ClassVar[Mapping[str, Any]] = {}
    """Capability ClassVars the plugin declares, e.g. ``{"uses_target_hidden_states": True}``."""
    valid_options: ClassVar[Sequence[Mapping[str, Any]]] = ()
    """Option sets (extra config fields) that must resolve."""
    invalid_options: ClassVar[Sequence[tuple[Mapping[str, Any], str]]] = ()
    """(option set, text the one-line error must contain) pairs that must be refused."""
    hash_sensitive_options: ClassVar[Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]] = ()
    """Pairs of valid option sets that change the computation graph, so their hashes differ."""
    reference_engine: ClassVar[bool | str] = True
    """True if the method runs in ``specpath_engine``; otherwise a string saying why not."""
    engine_prompts: ClassVar[Sequence[str]] = (
        "the cat sat on the mat. the cat sat on the mat. the cat",
        "1, 2, 3, 1, 2, 3, 1, 2",
        "def f(x):\n    return x + 1\n\ndef g(x):\n    return x",  # copy drafters get rejected here
    )
    engine_max_tokens: ClassVar[int] = 24
    engine_model: ClassVar[str | None] = None
    """Target checkpoint for the engine test (None: a tiny random-weight Llama written on the fly)."""
    engine_options: ClassVar[Mapping[str, Any]] = {}
    """Extra ``specpath_engine.LLM`` arguments for the engine test (e.g. ``trust_remote_code``)."""
    known_failures: ClassVar[Mapping[str, str]] = {}
    """``{"test_name": "reason"}``: tests that are known to fail; run as strict xfail."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A subclass is collected once it names a method and a config class (directly or by
        # inheritance), so a shared intermediate base (``MethodFamilyConformance``) is not.
        if "__test__" not in vars(cls):
            cls.__test__ = hasattr(cls, "method") and hasattr(cls, "config_class")
        for name, reason in cls.known_failures.items():
            test = getattr(cls, name, None)
            if not (name.startswith("test_") and callable(test)):
                raise TypeError(
                    f"{cls.__name__}.known_failures names {name!r}, which is not a test of "
                    f"{SpeculatorConformance.__name__}"
                )
            if not reason or not str(reason).strip():
                raise TypeError(f"{cls.__name__}.known_failures[{name!r}] needs a reason")
            setattr(cls, name, _strict_xfail(test, str(reason)))

    # -- hooks a plugin may override ----------------------------------------------------

    def resolve(self, **fields: Any) -> Any:
        """Build and resolve a ``SpeculativeConfig`` for this method (override to inject a
        target model). Errors are raised as ``SpeculativeConfigError``."""
        from specpath.config.speculative import SpeculativeConfig

        return SpeculativeConfig.from_dict({"method": self.method, **self.base_config, **fields})

    def speculator_context(self, spec: Any) -> Any:
        """The ``SpeculatorContext`` the speculator is built with: lent by ``engine_model``
        (default: the tiny random-weight target of the engine test), as the engine lends it."""
        from specpath_engine.testing.engine import target_context

        return target_context(self.engine_model)

    def make_speculator(self, spec: Any) -> Any:
        """Build the speculator the way an engine does (``specpath.create_speculator``)."""
        from specpath.factory import create_speculator

        return create_speculator(spec, self.speculator_context(spec))

    # -- helpers ------------------------------------------------------------------------

    def _require_speculator(self) -> None:
        if self.config_class.speculator_class is None:
            pytest.skip(f"{self.config_class.__name__} declares no speculator_class")

    # -- registration -------------------------------------------------------------------

    def test_entry_point_is_installed(self) -> None:
        eps = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == self.method]
        assert eps, (
            f"no entry point {self.method!r} in group {ENTRY_POINT_GROUP!r}: is the plugin "
            "installed (pip install -e .) and is the entry-point name the method name?"
        )
        assert len({ep.value for ep in eps}) == 1, f"several entry points named {self.method!r}: {eps}"
        if self.distribution is not None:
            dists = {ep.dist.metadata["Name"] for ep in eps if ep.dist is not None}
            assert self.distribution in dists, f"entry point {self.method!r} comes from {dists}"

    def test_entry_point_module_hooks_are_spelled_right(self) -> None:
        (ep,) = {ep.value: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
                 if ep.name == self.method}.values()
        module = ep.load()
        hooks = check_plugin_hooks(module, name=self.method)
        assert "specpath_register_methods" in hooks

    def test_demo_hook_says_what_the_demo_runs(self) -> None:
        """``specpath demo`` asks the ``specpath_demo`` hook (the plugin's answer, else the core's
        default): a :class:`specpath.demo.Demo` whose fields resolve for this method, or a reason."""
        from specpath import plugins
        from specpath.demo import Demo, demo_for

        plugins.load(self.method)
        demo = demo_for(self.method, self.config_class)
        assert isinstance(demo, Demo)
        if demo.skip is not None:
            assert demo.skip.strip() and "\n" not in demo.skip
            return
        from specpath.config.speculative import SpeculativeConfig

        # as the demo runs it: the method, the demo's K unless the answer gives one, on the embedded model
        fields = {"num_speculative_tokens": max(self.k_values), **demo.config, "method": self.method}
        spec = SpeculativeConfig.from_dict(fields)
        assert self.method in (spec.method, spec.custom_method)

    def test_method_resolves_to_config_class_through_the_plugin_index(self) -> None:
        from specpath import plugins
        from specpath.registry import get_registry

        records = [r for r in plugins.plugin_records() if r.name == self.method]
        assert records, f"the plugin index has no entry point {self.method!r}"
        plugins.load(self.method)
        record = next(r for r in plugins.plugin_records() if r.name == self.method)
        assert record.status == "loaded", f"plugin {self.method!r} is {record.status}: {record.error}"
        assert self.method in record.methods
        registration = get_registry().get(self.method)
        assert registration is not None and registration.config_class is self.config_class

    def test_resolved_config_is_the_declared_class(self) -> None:
        from specpath.methods import BUILTIN_METHODS

        spec = self.resolve(num_speculative_tokens=self.k_values[0])
        assert type(spec.speculator_config) is self.config_class
        if self.method in BUILTIN_METHODS:
            assert spec.method == self.method
        else:
            assert spec.custom_method == self.method
            assert spec.method == self.config_class.base_method

    # -- capabilities -------------------------------------------------------------------

    def test_declared_flags(self) -> None:
        from specpath.methods import CANONICAL_METHODS

        cls = self.config_class
        assert cls.base_method in CANONICAL_METHODS, f"base_method {cls.base_method!r} is not built in"
        for flag, value in self.expected_flags.items():
            assert getattr(cls, flag) == value, f"{cls.__name__}.{flag} is {getattr(cls, flag)!r}, declared {value!r}"
        assert isinstance(cls.supported_options, frozenset)

    def test_declared_properties_for_several_k(self) -> None:
        from specpath.config.engine import EngineConfig

        for k in self.k_values:
            spec = self.resolve(num_speculative_tokens=k)
            config = spec.speculator_config
            engine = EngineConfig(speculative_config=spec)
            for name, formula in self.expected.items():
                assert getattr(config, name) == formula(k), (
                    f"K={k}: {name} is {getattr(config, name)}, declared {formula(k)}"
                )
                # Engines read the forwarding properties; they must agree with the class.
                assert getattr(engine, name) == formula(k), f"K={k}: EngineConfig.{name} disagrees"

    def test_properties_are_consistent(self) -> None:
        for k in self.k_values:
            config = self.resolve(num_speculative_tokens=k).speculator_config
            lookahead = config.num_lookahead_tokens
            slots = config.max_num_new_slots_for_drafting
            prefill = config.num_prefill_lookahead_tokens
            for name, value in [("num_lookahead_tokens", lookahead),
                                ("max_num_new_slots_for_drafting", slots),
                                ("num_prefill_lookahead_tokens", prefill)]:
                assert isinstance(value, int) and not isinstance(value, bool), f"K={k}: {name} is {value!r}"
                assert 0 <= value <= k + 1, f"K={k}: {name}={value} is outside 0..K+1"
            if config.uses_target_hidden_states:
                assert prefill >= 1, f"K={k}: a hidden-state drafter needs num_prefill_lookahead_tokens >= 1"
            if config.uses_separate_workspace_lane:
                assert slots == 0, f"K={k}: a drafter in its own workspace adds no target rows ({slots})"
            if not config.proposes_draft_tokens:
                assert lookahead == 0 and slots == 0, f"K={k}: a non-drafting method reserves slots"

    def test_speculator_class_is_importable(self) -> None:
        from specpath.speculator import BaseSpeculator

        self._require_speculator()
        from specpath.factory import resolve_qualname

        cls = resolve_qualname(self.config_class.speculator_class)
        assert isinstance(cls, type) and issubclass(cls, BaseSpeculator)

    # -- options and errors ---------------------------------------------------------------

    def test_unknown_option_is_refused_by_name(self) -> None:
        from specpath.errors import SpeculativeConfigError

        with pytest.raises(SpeculativeConfigError) as info:
            self.resolve(num_speculative_tokens=2, conformance_unknown_option=1)
        message = str(info.value)
        assert "conformance_unknown_option" in message and "\n" not in message

    def test_options_of_other_methods_are_refused(self) -> None:
        from specpath.errors import SpeculativeConfigError

        from specpath.config.speculative import supports_option

        refused = {name: value for name, value in method_specific_option_examples().items()
                   if not supports_option(self.config_class, name)}
        for name, value in refused.items():
            with pytest.raises(SpeculativeConfigError) as info:
                self.resolve(num_speculative_tokens=2, **{name: value})
            assert name in str(info.value), f"the error for {name!r} does not name it: {info.value}"

    def test_valid_options_resolve(self) -> None:
        if not self.valid_options:
            pytest.skip("the plugin declares no valid_options")
        for options in self.valid_options:
            self.resolve(num_speculative_tokens=2, **options)

    def test_invalid_options_fail_with_one_line(self) -> None:
        from specpath.errors import SpeculativeConfigError

        if not self.invalid_options:
            pytest.skip("the plugin declares no invalid_options")
        for options, text in self.invalid_options:
            with pytest.raises(SpeculativeConfigError) as info:
                self.resolve(num_speculative_tokens=2, **options)
            message = str(info.value)
            assert text in message, f"{options}: error {message!r} does not contain {text!r}"
            assert "\n" not in message, f"{options}: error is not one line: {message!r}"

    # -- hash -----------------------------------------------------------------------------

    def test_hash_is_stable_and_follows_the_graph(self) -> None:
        k = self.k_values[0]
        first = self.resolve(num_speculative_tokens=k).compute_hash()
        assert isinstance(first, str) and first
        assert self.resolve(num_speculative_tokens=k).compute_hash() == first
        assert self.resolve(num_speculative_tokens=k + 1).compute_hash() != first
        for options_a, options_b in self.hash_sensitive_options:
            a = self.resolve(num_speculative_tokens=k, **options_a).compute_hash()
            b = self.resolve(num_speculative_tokens=k, **options_b).compute_hash()
            assert a != b, f"{options_a} and {options_b} hash equal"

    def _fresh_process(self) -> dict[str, Any]:
        """Resolve this method's config in a new Python process (same import path); returns
        its hash and which heavy modules resolution imported. Run once per class."""
        import json
        import os
        import subprocess
        import sys

        if type(self).resolve is not SpeculatorConformance.resolve:
            pytest.skip("resolve() is overridden: a fresh process cannot rebuild the same config")
        key = (type(self), self.k_values[0])
        if key not in _FRESH_PROCESS_RESULTS:
            config = {"method": self.method, **self.base_config, "num_speculative_tokens": self.k_values[0]}
            code = (
                "import json, sys; from specpath.config.speculative import SpeculativeConfig; "
                "h = SpeculativeConfig.from_dict(json.loads(sys.argv[1])).compute_hash(); "
                "print(json.dumps({'hash': h, 'heavy': sorted(m for m in ('torch', 'triton', 'numba') "
                "if m in sys.modules)}))"
            )
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # same import path
            done = subprocess.run([sys.executable, "-c", code, json.dumps(config)],
                                  capture_output=True, text=True, timeout=300, env=env)
            assert done.returncode == 0, done.stderr[-2000:]
            _FRESH_PROCESS_RESULTS[key] = json.loads(done.stdout.strip().splitlines()[-1])
        return _FRESH_PROCESS_RESULTS[key]

    def test_hash_is_the_same_in_a_fresh_process(self) -> None:
        """Compile caches outlive processes: the hash must not depend on object identity."""
        fresh = self._fresh_process()
        assert fresh["hash"] == self.resolve(num_speculative_tokens=self.k_values[0]).compute_hash()

    def test_resolution_imports_nothing_heavy(self) -> None:
        """Resolving a config loads the plugin's light module only: no torch, triton or numba."""
        heavy = self._fresh_process()["heavy"]
        assert not heavy, f"resolving method {self.method!r} imported {heavy}; import them lazily"

    # -- the speculator ---------------------------------------------------------------------

    def test_proposals_follow_the_contract(self) -> None:
        self._require_speculator()
        for k in self.k_values:
            spec = self.resolve(num_speculative_tokens=k)
            config = spec.speculator_config
            context = self.speculator_context(spec)
            steps = drive_speculator(
                self.make_speculator(spec),
                k=k,
                vocab_size=context.vocab_size,
                hidden_size=context.target_config.get("hidden_size", DEFAULT_HIDDEN_SIZE),
                uses_hidden_states=config.uses_target_hidden_states,
                proposes_draft_tokens=config.proposes_draft_tokens,
                seed=k,
            )
            prefill = steps[0]
            assert sum(prefill.proposal.num_draft_tokens) == 0

    def test_proposals_are_deterministic_when_greedy(self) -> None:
        self._require_speculator()
        k = max(self.k_values)
        runs = []
        for _ in range(2):
            spec = self.resolve(num_speculative_tokens=k)
            config = spec.speculator_config
            context = self.speculator_context(spec)
            steps = drive_speculator(
                self.make_speculator(spec), k=k, vocab_size=context.vocab_size,
                hidden_size=context.target_config.get("hidden_size", DEFAULT_HIDDEN_SIZE),
                uses_hidden_states=config.uses_target_hidden_states,
                proposes_draft_tokens=config.proposes_draft_tokens, seed=7,
            )
            runs.append([(s.proposal.token_ids.tolist(), list(s.proposal.num_draft_tokens)) for s in steps])
        assert runs[0] == runs[1]

    # -- the reference engine ---------------------------------------------------------------

    def test_greedy_output_is_identical_in_the_reference_engine(self) -> None:
        if self.reference_engine is not True:
            pytest.skip(f"the method declares it cannot run in specpath_engine: {self.reference_engine}")
        from specpath_engine.testing.engine import greedy_identity

        # K <= 4 keeps the check fast; drafts are accepted and rejected. K is fixed: the identity is
        # about verification, and the adaptive governor may find a toy drafter beside a toy target
        # not worth drafting for a batch (it must beat plain decoding there), leaving it vacuous.
        result = greedy_identity(
            self.resolve_engine_config(num_speculative_tokens=max(2, min(self.k_values[-1], 4)),
                                       draft_length_policy="fixed"),
            prompts=list(self.engine_prompts),
            max_tokens=self.engine_max_tokens,
            model=self.engine_model,
            **self.engine_options,
        )
        assert result.speculative == result.plain, result.describe()
        if self.config_class.proposes_draft_tokens:  # otherwise the identity would hold vacuously
            assert result.num_draft_tokens > 0, "the speculator proposed no drafts in the engine test"

    def resolve_engine_config(self, **fields: Any) -> dict[str, Any]:
        """The ``speculative_config`` dict handed to the reference engine."""
        return {"method": self.method, **self.base_config, **fields}


LOOKAHEAD_PROPERTIES = ("num_lookahead_tokens", "max_num_new_slots_for_drafting", "num_prefill_lookahead_tokens")
"""The K-dependent properties of a ``SpeculatorConfig``, in the order :func:`conformance_tests`
takes their expected values."""

MODEL_FREE_FLAGS: Mapping[str, Any] = {
    "uses_target_hidden_states": False,
    "uses_separate_workspace_lane": False,
    "draft_has_own_vocab": False,
    "supports_pcp": False,
}
"""The capability flags of a drafter that reads token ids only and has no model (n-gram, suffix,
a custom proposer): one table the model-free plugins' conformance tests extend."""


def _per_k(value: int | Callable[[int], int]) -> Callable[[int], int]:
    return value if callable(value) else (lambda k, n=int(value): n)


def conformance_tests(
    method: str,
    config_class: type,
    *,
    lookahead: Sequence[int | Callable[[int], int]],
    flags: Mapping[str, Any],
    valid: Sequence[Mapping[str, Any]] = (),
    invalid: Sequence[tuple[Mapping[str, Any], str]] = (),
    hash_sensitive: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]] = (),
    distribution: str | None = None,
    base: type[SpeculatorConformance] | None = None,
    name: str | None = None,
    **settings: Any,
) -> type[SpeculatorConformance]:
    """A conformance test class built from one declarative table; bind it to a ``Test*`` name::

        TestMine = conformance_tests(
            "mine", MineSpeculatorConfig,
            lookahead=(0, 0, 0),             # num_lookahead_tokens, new drafting slots, prefill lookahead
            flags={**MODEL_FREE_FLAGS, "base_method": "mine"},
            valid=[{"speculator_options": {"depth": 2}}],
            invalid=[({"speculator_options": {"depth": 0}}, "depth")],
        )

    ``lookahead`` gives the three :data:`LOOKAHEAD_PROPERTIES` in order, each an int (the same
    for every K) or a function of K. ``distribution`` defaults to the installed distribution
    that ships ``config_class``'s package. ``base`` is a :class:`SpeculatorConformance`
    subclass whose hooks (``resolve``, ...) the tests use; every other keyword is a class
    attribute of the kit (``base_config``, ``engine_model``, ``k_values``, ``known_failures``, ...).
    """
    if len(lookahead) != len(LOOKAHEAD_PROPERTIES):
        raise TypeError(f"lookahead gives {', '.join(LOOKAHEAD_PROPERTIES)}: 3 values, got {len(lookahead)}")
    if distribution is None:
        package = config_class.__module__.partition(".")[0]
        distribution = (metadata.packages_distributions().get(package) or [None])[0]
    table = {
        "method": method,
        "config_class": config_class,
        "distribution": distribution,
        "expected": {prop: _per_k(v) for prop, v in zip(LOOKAHEAD_PROPERTIES, lookahead)},
        "expected_flags": dict(flags),
        "valid_options": list(valid),
        "invalid_options": list(invalid),
        "hash_sensitive_options": list(hash_sensitive),
        **settings,
    }
    import sys

    cls_name = name or f"Test{config_class.__name__.removesuffix('Config')}Conformance"
    table["__module__"] = sys._getframe(1).f_globals.get("__name__", __name__)  # the calling test module
    return type(cls_name, (base or SpeculatorConformance,), table)
