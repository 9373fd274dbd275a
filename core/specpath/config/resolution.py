"""The resolution of a :class:`~specpath.config.speculative.SpeculativeConfig`: named steps, run once.

:func:`resolve` runs :data:`STEPS` in order on a config under construction; each step adds
its own entries to the trace that ``specpath explain`` shows:

1. ``input`` - every user field is structured by the strict converter and checked by its
   field rules (once; hook updates are checked the same way when they are applied);
2. ``method`` - a registered custom method becomes ``custom_method`` and ``method`` its class's
   ``base_method``; otherwise ``method`` is inferred from ``model`` (``[ngram]`` -> ngram, an
   import path -> custom_class, no model -> draft_model); aliases are normalised
   (``deepseek_mtp`` -> ``mtp``); unknown names fail with the closest one and the methods;
3. ``hub`` - a hub id ``model`` (``org/name``) becomes its snapshot in the local Hugging Face
   cache (:mod:`specpath.hub`); never a download;
4. ``detect`` - with no method but a draft checkpoint: the ``specpath_detect_method`` hook
   (the checkpoint's declared ``speculator_config_class`` first, then each plugin's own
   recognition, path hints last, in one documented order), else draft_model;
5. ``class`` - the config class (loading only the plugin that provides the method);
6. ``agree`` - with a requested method, a checkpoint that another plugin recognises from its
   ``config.json`` must be one the class accepts (``accepts_checkpoint_of``), else one line
   naming both;
7. ``variant`` - ``parallel_drafting`` left unset becomes what the draft checkpoint declares
   (``config.json`` ``parallel_drafting: true``, where the class supports parallel drafting),
   else False;
8. ``default_model`` - the class's shipped drafter for this target when no ``model`` is given;
   then a drafter trained for a quantised target (:data:`DECLARED_TARGET_QUANTIZATION`) is
   noted where the target is not served that way;
9. ``configure`` - the class hook's returned field updates are applied, then a shipped
   drafter's draft tree (``ShippedCheckpoint.tree``) where the config sets neither K nor
   ``draft_tree_topk``;
10. ``specialize`` - the checkpoint-declared class (which must agree with the requested
   method) or the class's ``specialize``;
11. ``options`` - method-specific options must be in the class's ``supported_options``;
12. ``verify`` - the cross-field rules (:data:`specpath.config.cross_rules.CROSS_FIELD_RULES`), then
    the class's own ``verify``;
13. ``model_free`` - a ``model_free_drafter`` is resolved as a config of its own (same target)
    and must be a model-free method within this config's K; where the config names none, a
    shipped drafter's companion (``ShippedCheckpoint.model_free``) or the one the checkpoint's
    ``config.json`` names (:data:`DECLARED_MODEL_FREE`) is taken, or noted where it does not apply;
14. ``result`` - the class's lookahead values must be ints >= 0.

The draft checkpoint is read at most once and what it declares is interpreted at most once.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from specpath import lookup, plugins
from specpath.config import cross_rules, rules
from specpath.config.checkpoint import DraftCheckpoint, read_draft_checkpoint
from specpath.config.declared import PLUGIN_NAME as DECLARED_PLUGIN
from specpath.config.frozen import FrozenDict
from specpath.config.model import ModelConfig, ParallelConfig
from specpath.config.speculative import CHECK as _CHECK
from specpath.config.speculative import DERIVED as _DERIVED
from specpath.config.speculative import INJECTED as _INJECTED
from specpath.config.speculative import KIND as _KIND
from specpath.config.speculative import METHOD_SPECIFIC_OPTIONS, supports_option
from specpath.config.speculator import SpeculatorConfig
from specpath.errors import SpeculativeConfigError, closest_match, humanize_structuring_error
from specpath.hub import is_hub_id, resolve_model_path
from specpath.methods import BUILTIN_METHODS, NGRAM_MODEL_NAMES, normalize_method


_ASKS_FOR_NOTHING: Mapping[str, Any] = {"parallel_drafting": False}
"""Method-specific values that are no request (any method takes them, as before their default
became None: the checkpoint's choice)."""

DECLARED_MODEL_FREE = "specpath_model_free"
"""The draft checkpoint's ``config.json`` key naming the model-free method drafted beside it by
default (as a shipped row's ``ShippedCheckpoint.model_free``)."""

DECLARED_TARGET_QUANTIZATION = "specpath_target_quantization"
"""The draft checkpoint's ``config.json`` key naming the weight-only quantization of the target
it was trained for (``specpath train --target-quantization``)."""

_RESULT_VALUES = ("num_lookahead_tokens", "num_prefill_lookahead_tokens", "max_num_new_slots_for_drafting")


@attrs.frozen
class Declared:
    """What a draft checkpoint says it is."""

    name: str
    base_method: str
    config_class: type[SpeculatorConfig] | None
    """None for a built-in name: the requested class is then used (no plugin is loaded)."""
    how: str


def call_hook(cls: type[SpeculatorConfig], hook: str, *args: Any) -> Any:
    """Call a config-class hook; a plugin bug becomes a one-line error naming the hook."""
    try:
        return getattr(cls, hook)(*args)
    except SpeculativeConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - never a raw traceback from plugin code
        text = " ".join(str(exc).split())
        raise SpeculativeConfigError(f"{cls.qualname()}.{hook} failed: {type(exc).__name__}: {text}") from exc


def _is_custom_proposer_path(model: object) -> bool:
    """``pkg.module:Class`` or a dotted path of identifiers with no ``/`` (``pkg.module.Class``,
    as vLLM detects custom_class), that is not an existing local path."""
    return (
        isinstance(model, str)
        and re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*|\.[A-Za-z_]\w*)", model) is not None
        and not os.path.exists(model)
    )


class Resolution:
    """One run of :data:`STEPS` on a config under construction (set through ``object.__setattr__``).

    It is the :class:`~specpath.config.cross_rules.RuleContext` the cross-field rules see.
    """

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.schema = type(spec)
        self.fields = attrs.fields_dict(self.schema)
        self.trace: list[tuple[str, str]] = []
        self.config_class: type[SpeculatorConfig] = SpeculatorConfig
        self.declared_by_detection: Declared | None = None
        self._checkpoint: tuple[str | None, DraftCheckpoint | None] | None = None
        self._declared: tuple[str | None, Declared | None] | None = None

    # -- helpers -------------------------------------------------------------------------

    def set(self, **updates: Any) -> None:
        for name, value in updates.items():
            object.__setattr__(self.spec, name, value)

    def note(self, step: str, detail: str) -> None:
        self.trace.append((step, detail))

    def structure_field(self, f: attrs.Attribute, value: Any, who: str = "") -> Any:
        """Strictly type-check one user field's value and run its field rules; lists become
        tuples, mappings read-only. None is accepted only where the field's type allows it."""
        from specpath.config.converter import get_converter

        try:
            if value is None and f.default is not None:
                get_converter().structure(None, f.type)  # raises unless the type allows None
            structured = None if value is None else get_converter().structure(value, f.type)
            if structured is not None:
                rules.check_field(f.name, structured, f.metadata.get(_CHECK, ()))
        except SpeculativeConfigError as err:
            if who:
                raise SpeculativeConfigError(f"{who} set an invalid value: {err}") from None
            raise
        except Exception as exc:  # noqa: BLE001 - the humaniser is the single exit
            err = humanize_structuring_error(exc, root=f"speculative_config.{f.name}")
            if who:
                raise SpeculativeConfigError(f"{who} set an invalid value: {err}") from None
            raise err from None
        if f.name == "num_speculative_tokens_per_batch_size" and structured is not None:
            return tuple(tuple(r) for r in structured)
        if isinstance(structured, list):
            return tuple(structured)
        if isinstance(structured, Mapping):
            return FrozenDict(dict(structured))
        return structured

    def apply_updates(self, owner: type, hook: str, updates: Mapping[str, Any]) -> None:
        """Apply the field updates a config-class hook returned, checked like user input."""
        names = {name for name, f in self.fields.items() if f.init}
        who = f"{owner.qualname()}.{hook}"
        if not isinstance(updates, Mapping):
            raise SpeculativeConfigError(f"{who} must return a mapping of field updates", value=updates)
        for key in updates:
            if key not in names:
                raise SpeculativeConfigError(
                    f"{who} returned an unknown field",
                    field="speculative_config",
                    value=key,
                    suggestion=closest_match(key, names),
                )
        checked = {}
        for key, value in updates.items():
            kind = self.fields[key].metadata.get(_KIND)
            if kind is None:
                checked[key] = self.structure_field(self.fields[key], value, who)
            elif kind == _INJECTED:
                raise SpeculativeConfigError(f"{who} may not change the injected field {key!r}")
            else:
                expected = {"draft_model_config": ModelConfig, "draft_parallel_config": ParallelConfig}.get(key, str)
                if value is not None and not isinstance(value, expected):
                    raise SpeculativeConfigError(f"{who} set {key} to a {type(value).__name__}, expected {expected.__name__}")
                checked[key] = value
        changed = {k for k, v in checked.items() if getattr(self.spec, k) != v or k == "draft_model_config"}
        self.set(**checked)
        if changed:
            self.note(hook, f"{owner.__name__}.{hook} set " + ", ".join(sorted(changed)))

    # -- checkpoint facts (each computed once) -------------------------------------------

    def checkpoint(self) -> DraftCheckpoint | None:
        """The draft checkpoint behind ``model`` (read once per model value)."""
        spec = self.spec
        if self._checkpoint is None or self._checkpoint[0] != spec.model:
            draft = spec.draft_model_config
            hf = None if draft is None else draft.hf_config.to_dict()
            self._checkpoint = (spec.model, read_draft_checkpoint(spec.model, hf))
        return self._checkpoint[1]

    def declared(self) -> Declared | None:
        """What the checkpoint's config.json declares, interpreted once: a registered method
        name, or with trust_remote_code a ``module:Class`` import path."""
        if self._declared is None or self._declared[0] != self.spec.model:
            self._declared = (self.spec.model, self._interpret_declaration(self.checkpoint()))
        return self._declared[1]

    def _interpret_declaration(self, checkpoint: DraftCheckpoint | None) -> Declared | None:
        if checkpoint is None or checkpoint.declared_class is None:
            return None
        value, field = checkpoint.declared_class, checkpoint.declared_field
        if not isinstance(value, str):
            raise SpeculativeConfigError("must be a method name", field=field, value=value)
        if ":" in value:
            target = self.spec.target_model_config
            if not (target is not None and target.trust_remote_code):
                raise SpeculativeConfigError(
                    "declares its config class by import path; only registered method names are "
                    "allowed unless trust_remote_code=True",
                    field=field,
                    value=value,
                )
            from specpath.factory import resolve_qualname

            cls = resolve_qualname(value, field=field)
            if not (isinstance(cls, type) and issubclass(cls, SpeculatorConfig)):
                raise SpeculativeConfigError("is not a SpeculatorConfig subclass", field=field, value=value)
            return Declared(value, cls.base_method, cls, "checkpoint import path (trust_remote_code)")
        custom = lookup.get_custom_speculator_config_class(value)
        if custom is not None:
            return Declared(value, custom.base_method, custom, "checkpoint declares registered method")
        name = normalize_method(value)
        if name not in BUILTIN_METHODS:
            err = lookup.unknown_method_error(value)
            raise SpeculativeConfigError(err.problem, field=field, value=value, suggestion=err.suggestion)
        return Declared(name, name, None, "checkpoint declares built-in method")

    # -- the steps -----------------------------------------------------------------------

    def step_input(self) -> None:
        """Structure and check every user field; derived fields must be empty, injected ones typed."""
        spec = self.spec
        inputs = {}
        for f in self.schema.user_fields():
            inputs[f.name] = self.structure_field(f, getattr(spec, f.name))
        self.set(**inputs)
        for f in self.fields.values():
            if f.metadata.get(_KIND) == _DERIVED and getattr(spec, f.name) is not None:
                raise SpeculativeConfigError(
                    "is set during resolution, not given as input (use SpeculativeConfig.replace to "
                    "derive a new config)",
                    field=f"speculative_config.{f.name}",
                )
        for name, cls in (("target_model_config", ModelConfig), ("target_parallel_config", ParallelConfig)):
            value = getattr(spec, name)
            if value is not None and not isinstance(value, cls):
                raise SpeculativeConfigError(f"must be a {cls.__name__}", field=name, value=value)
        self.set(inputs=FrozenDict(inputs))
        given = {k: v for k, v in inputs.items() if v != self.fields[k].default}
        self.note("input", json.dumps(given, sort_keys=True, default=repr))

    def step_method(self) -> None:
        """Custom method, inference from ``model``, alias normalisation, unknown names."""
        spec = self.spec
        method, custom = spec.method, None
        custom_cls = lookup.get_custom_speculator_config_class(method)
        if custom_cls is not None:
            custom, method = method, custom_cls.base_method
            self.note("custom", f"registered custom method {custom!r} builds on {method!r}")
        elif method is None and _is_custom_proposer_path(spec.model):
            method = "custom_class"
            self.note("infer", f"model {spec.model!r} looks like an import path: method 'custom_class'")
        elif method is None and spec.model in NGRAM_MODEL_NAMES:
            method = "ngram"
            self.note("infer", f"model {spec.model!r}: method 'ngram'")
        elif method is None and spec.model is None:
            method = "draft_model"
            self.note("infer", "no method and no model: method 'draft_model'")
        if method is not None and custom is None:
            normalised = normalize_method(method)
            if normalised != method:
                self.note("alias", f"{method!r} normalised to {normalised!r}")
            method = normalised
            if method not in BUILTIN_METHODS:
                raise lookup.unknown_method_error(method)
        self.set(method=method, custom_method=custom)

    def step_hub(self) -> None:
        """A hub id ``model`` becomes its snapshot directory in the local cache (the target's
        ``load_config.download_dir``, else the default cache); never a download."""
        spec = self.spec
        if spec.draft_model_config is None and is_hub_id(spec.model):
            target = spec.target_model_config
            cache = None if target is None else target.load_config.download_dir
            if spec.draft_load_config is not None:
                cache = spec.draft_load_config.download_dir or cache
            local = resolve_model_path(spec.model, spec.revision, field="speculative_config.model", cache_dir=cache)
            self.note("hub", f"hub id {spec.model!r} read from the local cache: {local}")
            self.set(model=local)

    def step_detect(self) -> None:
        """No method yet: ask the ``specpath_detect_method`` hook about the draft checkpoint."""
        if self.spec.method is not None:
            return
        detection = plugins.detect_method(self.checkpoint())
        if detection is None:
            self.note("infer", "no method given and the checkpoint was not recognised: 'draft_model'")
            self.set(method="draft_model")
            return
        if detection.plugin == DECLARED_PLUGIN:
            declared = self.declared()
            cls = declared.config_class
            registered = cls is not None and lookup.get_custom_speculator_config_class(declared.name) is cls
            self.declared_by_detection = declared
            self.note("infer", f"{declared.how}: {declared.name!r}")
            self.set(method=declared.base_method, custom_method=declared.name if registered else None)
            return
        found = detection.method
        field = "speculative_config.model"
        if not isinstance(found, str):
            raise SpeculativeConfigError("a specpath_detect_method hook returned a non-string", field=field, value=found)
        by = f"plugin {detection.plugin!r} ({detection.hook})"
        custom_cls = lookup.get_custom_speculator_config_class(found)
        if custom_cls is not None:
            self.declared_by_detection = Declared(found, custom_cls.base_method, custom_cls, "plugin detection")
            self.note("infer", f"{by} recognised custom method {found!r}")
            self.set(method=custom_cls.base_method, custom_method=found)
            return
        name = normalize_method(found)
        if name not in BUILTIN_METHODS:
            raise SpeculativeConfigError("a specpath_detect_method hook returned an unknown method", field=field, value=found)
        self.note("infer", f"{by} recognised {name!r}")
        self.set(method=name)

    def step_class(self) -> None:
        """The config class: the custom method's, or the plugin's for the built-in name."""
        spec = self.spec
        if spec.custom_method is not None:
            cls = lookup.get_custom_speculator_config_class(spec.custom_method)
            self.note("class", f"{cls.qualname()} (registered for custom method {spec.custom_method!r})")
        else:
            registration = lookup.builtin_config_class(spec.method)
            cls = registration.config_class
            self.note("class", f"{cls.qualname()} (bound to {spec.method!r} by {registration.origin})")
        self.config_class = cls

    def step_agree(self) -> None:
        """A requested method and a checkpoint that says, in its ``config.json``, that it is for
        another method: one line naming both (path hints are not asked: they are guesses). The
        declared class is checked in ``specialize``; a class may accept another plugin's
        checkpoints (``accepts_checkpoint_of``: DSpark on a DeepSeek-V4 target with MTP layers)."""
        spec = self.spec
        if self.declared_by_detection is not None or spec.model is None or spec.method in NGRAM_MODEL_NAMES:
            return
        checkpoint = self.checkpoint()
        if checkpoint is None or not checkpoint.config:
            return
        detection = plugins.detect_method(DraftCheckpoint(None, checkpoint.config))
        if detection is None or detection.plugin == DECLARED_PLUGIN or not isinstance(detection.method, str):
            return
        custom_cls = lookup.get_custom_speculator_config_class(detection.method)
        found = custom_cls.base_method if custom_cls is not None else normalize_method(detection.method)
        if found == spec.method or call_hook(self.config_class, "accepts_checkpoint_of", found, checkpoint):
            return
        requested = spec.custom_method or spec.method
        raise SpeculativeConfigError(
            f"requested method={requested!r}, but the draft model {spec.model!r} is a {found!r} checkpoint "
            f"(recognised from its config.json by plugin {detection.plugin!r}); use method {found!r} or drop "
            "'method', or use a matching checkpoint",
            field="speculative_config.method",
            value=requested,
        )

    def step_variant(self) -> None:
        """``parallel_drafting`` not given: the checkpoint's own ``parallel_drafting: true`` (a
        head or draft trained to draft in parallel) where the class supports it, else False.
        Only specpath's key counts: a mask token alone (amd/PARD's ``pard_token``) makes a
        checkpoint able to, not made to, so it drafts autoregressively unless asked."""
        spec = self.spec
        if spec.parallel_drafting is not None:
            return
        declared = False
        if spec.model is not None and self.config_class.supports_parallel_drafting is True:
            checkpoint = self.checkpoint()
            config = {} if checkpoint is None else checkpoint.config or {}
            declared = config.get("parallel_drafting") is True
            if declared:
                self.note("variant", "parallel_drafting: true, declared by the checkpoint (trained for it; "
                                     "parallel_drafting: false drafts autoregressively)")
        self.set(parallel_drafting=declared)

    def step_default_model(self) -> None:
        cls = self.config_class
        if self.spec.model is None:
            model = call_hook(cls, "default_model", self.spec)
            if model is not None:
                self.set(model=model)
                self.note("default_model", f"{cls.__name__}.default_model: {model!r}")
        self._note_target_quantization()

    def _note_target_quantization(self) -> None:
        """A drafter trained for a quantised target (its checkpoint's
        :data:`DECLARED_TARGET_QUANTIZATION`) serves any target, losslessly, but drafts that
        target's tokens: say so where this target is served otherwise (a note, not an error)."""
        target = self.spec.target_model_config
        if self.spec.model is None or target is None:
            return
        checkpoint = self.checkpoint()
        trained = None if checkpoint is None else (checkpoint.config or {}).get(DECLARED_TARGET_QUANTIZATION)
        if trained is None or trained == target.quantization:
            return
        served = f"served {target.quantization}" if target.quantization else "not quantised"
        self.note("default_model", f"the drafter was trained for the target quantised {trained} (its checkpoint's "
                                   f"{DECLARED_TARGET_QUANTIZATION}); this target is {served}: expect fewer "
                                   "accepted drafts")

    def step_configure(self) -> None:
        """The class hook's field updates, then a shipped drafter's tree (``shipped_tree``: where the
        config sets neither K nor the class's ``tree_option``)."""
        tree = self.config_class.shipped_tree(self.spec)
        self.apply_updates(self.config_class, "configure", call_hook(self.config_class, "configure", self.spec))
        option = self.config_class.tree_option
        if tree is not None and supports_option(self.config_class, option):
            self.set(num_speculative_tokens=tree[0], **{option: tree[1]})
            self.note("configure", f"the shipped drafter's tree: K={tree[0]} nodes, {option}={tree[1]} "
                                   f"(set num_speculative_tokens or {option} to choose another shape)")

    def step_specialize(self) -> None:
        """The checkpoint-declared class (which must agree with the requested method), else
        ``specialize``."""
        spec, config_cls = self.spec, self.config_class
        declared = self.declared_by_detection
        if declared is None:  # the method was requested: check what the checkpoint says
            declared = self.declared()
            if declared is not None and declared.base_method != spec.method:
                requested = spec.custom_method or spec.method
                raise SpeculativeConfigError(
                    f"requested method={requested!r}, but the draft model {spec.model!r} is a "
                    f"{declared.base_method!r} checkpoint ({declared.how} {declared.name!r}); drop 'method' "
                    "or use a matching checkpoint",
                    field="speculative_config.method",
                    value=requested,
                )
        cls = None if declared is None else declared.config_class
        if cls is not None and cls is not config_cls:
            if issubclass(cls, config_cls):
                self.note("class", f"{cls.qualname()} ({declared.how} {declared.name!r})")
                self.config_class = cls
                return
            if not issubclass(config_cls, cls):  # a requested subclass is more specific: keep it
                raise SpeculativeConfigError(
                    f"the checkpoint declares {cls.qualname()}, which does not extend {config_cls.qualname()}",
                    field="speculative_config.model",
                    value=spec.model,
                )
        final = call_hook(config_cls, "specialize", spec)
        if not (isinstance(final, type) and issubclass(final, config_cls)):
            raise SpeculativeConfigError(f"{config_cls.qualname()}.specialize must return a subclass of it", value=final)
        if final is not config_cls:
            self.note("class", f"{final.qualname()} ({config_cls.__name__}.specialize)")
        self.config_class = final

    def step_options(self) -> None:
        """Method-specific options the user gave must be supported by the class (values its
        own hooks filled in are the class's business)."""
        inputs = self.spec.inputs
        given = {o: inputs[o] for o in METHOD_SPECIFIC_OPTIONS
                 if inputs[o] != self.fields[o].default
                 and not (o in _ASKS_FOR_NOTHING and inputs[o] is _ASKS_FOR_NOTHING[o])}
        cross_rules.check_supported_options(self.spec, self.config_class, given, supports_option)

    def step_verify(self) -> None:
        """Build the class's instance, then the cross-field rules and the class's ``verify``."""
        self.set(speculator_config=self.config_class(spec=self.spec))
        for rule in cross_rules.CROSS_FIELD_RULES:
            rule(self)
        call_hook(self.config_class, "verify", self.spec)

    def step_model_free(self) -> None:
        """``model_free_drafter``: resolved as a speculative config of its own against the same
        target (its errors name the nested field), then :func:`cross_rules.check_model_free_drafter`."""
        spec = self.spec
        given = spec.model_free_drafter
        default = self.config_class.shipped_model_free(spec)
        origin, beside = "the shipped drafter's", "the shipped drafter (its default"
        if default is None and given is None:
            default = self._declared_model_free()
            origin = "the checkpoint's"
            beside = f"the drafter (its checkpoint's {DECLARED_MODEL_FREE}, measured when it was trained"
        if default is not None:
            if lookup.find_registration(default) is not None:
                given = {"method": default}
                self.note("model_free", f"{default!r} beside {beside}; model_free_drafter: {{}} turns it off)")
            else:
                self.note("model_free", f"{origin} model-free companion {default!r} is not "
                                        "installed: the drafter drafts alone")
        if not given:  # None, or {}: the drafter alone
            if given is not None:
                self.note("model_free", "model_free_drafter: {}: the drafter drafts alone")
            self._drafter_alone()
            return
        field = "speculative_config.model_free_drafter"
        allowed = {"method", "num_speculative_tokens", *METHOD_SPECIFIC_OPTIONS}
        for key in given:
            if key not in allowed:
                raise SpeculativeConfigError(
                    "takes only 'method', 'num_speculative_tokens' and the method's own options; set "
                    f"{key!r} on the speculative config itself", field=field, value=key)
        try:
            inner = self._model_free_config(given, field)
        except SpeculativeConfigError as err:
            if spec.model_free_drafter is not None:
                raise
            # the shipped drafter's (or the checkpoint's) default companion does not fit what this
            # config asks for (adaptive verification, say): the drafter drafts alone, as without it
            self.note("model_free", f"{origin} companion {default!r} does not apply: {err}; the "
                                    "drafter drafts alone")
            self._drafter_alone()
            return
        minimum = 2 if spec.model_free_min_tokens is None else spec.model_free_min_tokens
        self.set(model_free_config=inner, model_free_min_tokens=minimum)
        for step, detail in inner.resolution_trace:
            self.note("model_free", f"{step}: {detail}")
        self.note("model_free", f"both draft each step; {inner.custom_method or inner.method!r}'s (K="
                                f"{inner.num_speculative_tokens}, at least {minimum} long) is verified instead of "
                                f"{spec.custom_method or spec.method!r}'s where it extends it or where the two part "
                                "and the request's record favours it (specpath.hybrid)")

    def _declared_model_free(self) -> str | None:
        """The model-free method the draft checkpoint's ``config.json`` names as its companion
        (:data:`DECLARED_MODEL_FREE`, written by ``specpath train`` where it raised the held-out
        τ), or None; a value that is not a method name is noted and ignored."""
        if self.spec.model is None:
            return None
        checkpoint = self.checkpoint()
        value = None if checkpoint is None else (checkpoint.config or {}).get(DECLARED_MODEL_FREE)
        if value is None or (isinstance(value, str) and value):
            return value
        self.note("model_free", f"the checkpoint's {DECLARED_MODEL_FREE} {value!r} is not a method name: ignored")
        return None

    def _model_free_config(self, given: Mapping[str, Any], field: str) -> Any:
        """``given`` resolved as a SpeculativeConfig against this config's target at its K (errors
        name ``field``) and checked as a model-free method beside this config's drafter."""
        spec = self.spec
        data = {"num_speculative_tokens": spec.num_speculative_tokens, **given}
        try:
            inner = self.schema.from_dict(data, target_model_config=spec.target_model_config,
                                          target_parallel_config=spec.target_parallel_config)
        except SpeculativeConfigError as err:
            raise _nested_error(err, field) from None
        cross_rules.check_model_free_drafter(spec, inner, field)
        return inner

    def _drafter_alone(self) -> None:
        """No model-free method beside the drafter: ``model_free_min_tokens`` has nothing to apply to."""
        if self.spec.model_free_min_tokens is not None:
            raise SpeculativeConfigError("is only valid with model_free_drafter",
                                         field="speculative_config.model_free_min_tokens",
                                         value=self.spec.model_free_min_tokens)

    def step_result(self) -> None:
        spec, cls = self.spec, self.config_class
        values = {}
        for name in _RESULT_VALUES:
            try:
                value = getattr(spec.speculator_config, name)
            except Exception as exc:  # noqa: BLE001 - a property bug is a start-up error too
                raise SpeculativeConfigError(
                    f"{cls.qualname()}.{name} failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
                ) from exc
            if type(value) is not int or value < 0:
                raise SpeculativeConfigError(f"{cls.qualname()}.{name} must be an int >= 0", value=value)
            values[name] = value
        self.note(
            "result",
            f"method={spec.method!r} custom_method={spec.custom_method!r} K={spec.num_speculative_tokens} "
            f"lookahead={values['num_lookahead_tokens']} prefill_lookahead={values['num_prefill_lookahead_tokens']} "
            f"extra_slots={values['max_num_new_slots_for_drafting']}",
        )
        self.set(resolution_trace=tuple(self.trace))


STEPS: tuple[tuple[str, Callable[[Resolution], None]], ...] = (
    ("input", Resolution.step_input),
    ("method", Resolution.step_method),
    ("hub", Resolution.step_hub),
    ("detect", Resolution.step_detect),
    ("class", Resolution.step_class),
    ("agree", Resolution.step_agree),
    ("variant", Resolution.step_variant),
    ("default_model", Resolution.step_default_model),
    ("configure", Resolution.step_configure),
    ("specialize", Resolution.step_specialize),
    ("options", Resolution.step_options),
    ("verify", Resolution.step_verify),
    ("model_free", Resolution.step_model_free),
    ("result", Resolution.step_result),
)
"""The resolution, in order (see the module docstring)."""


def _nested_error(err: SpeculativeConfigError, field: str) -> SpeculativeConfigError:
    """``err`` from resolving a nested config, with its field path under ``field``."""
    root = "speculative_config"
    where = field
    if err.field and err.field.startswith(root):
        where = field + err.field[len(root):]
    elif err.field:
        where = f"{field}.{err.field}"
    extra = {} if err.value is None else {"value": err.value}
    return SpeculativeConfigError(err.problem, field=where, allowed=err.allowed, suggestion=err.suggestion, **extra)


def resolve(spec: Any) -> None:
    """Run every step on ``spec`` (a SpeculativeConfig under construction)."""
    resolution = Resolution(spec)
    for _name, step in STEPS:
        step(resolution)
