"""Test helpers for drafters (the one source of tiny targets and engines for the plugins' tests):
tiny random targets on disk, random heads of a given class, an engine wired the way an engine
builds a speculator, and an independent from-scratch computation of the drafts a head should
propose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

from specpath_drafting.heads import HiddenStateHead, save_head
from specpath_drafting.heads import HeadConfig


TARGET_STATE_FLAGS: Mapping[str, Any] = {"uses_target_hidden_states": True, "draft_has_own_vocab": False}
"""The capability flags every drafter on the target's hidden states declares (it reads them and
drafts in the target's vocabulary): the table the hidden-state plugins' conformance tests extend."""

TINY_PROMPTS = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] * 3, [5, 9, 3, 1] * 6, [7, 7, 7], list(range(20, 50))]
"""Token prompts for the tiny targets: periodic, repeated, short and a run."""


def greedy(max_tokens: int = 24) -> Any:
    from specpath_engine.request import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)


def tiny_llm(target_path: str | Path, spec: Mapping[str, Any] | None = None, **options: Any) -> Any:
    """An ``LLM`` over a tiny target on disk: one thread, 4 sequences, 40 tokens a step."""
    from specpath_engine.llm import LLM

    return LLM(str(target_path), dict(spec) if spec else None,
               **{"num_threads": 1, "max_num_batched_tokens": 40, "max_num_seqs": 4, **options})


def baseline_tokens(target_path: str | Path, prompts: Sequence[Sequence[int]] = TINY_PROMPTS) -> list[list[int]]:
    """Plain greedy outputs (no speculation) of the tiny target."""
    return [o.token_ids for o in tiny_llm(target_path).generate([list(p) for p in prompts], greedy())]


class DraftingSetup(NamedTuple):
    """What a drafting test module shares: a tiny target saved under ``root / "target"``, the
    drafter(s) made for it and the target's plain greedy outputs on :data:`TINY_PROMPTS`."""

    root: Path
    target: Any
    drafter: Any
    baseline: list[list[int]]

    def llm(self, spec: Mapping[str, Any] | None, **options: Any) -> Any:
        """An ``LLM`` over the setup's target speculating with ``spec`` (see :func:`tiny_llm`)."""
        return tiny_llm(self.root / "target", spec, **options)


def drafting_setup(name: str, make_drafter: Callable[[Path, Any], Any], *, num_layers: int = 4) -> Any:
    """A module-scoped pytest fixture giving a :class:`DraftingSetup`: a float64 tiny target with
    ``num_layers`` layers and ``make_drafter(root, target)`` (a path, or a dict of them)::

        setup = drafting_setup("eagle", lambda root, target: random_head(EagleHead, target, root / "head"))
    """
    import pytest

    @pytest.fixture(scope="module")
    def setup(tmp_path_factory: Any) -> DraftingSetup:
        root = tmp_path_factory.mktemp(name)
        target = drafting_target(root / "target", num_layers=num_layers)
        return DraftingSetup(root, target, make_drafter(root, target), baseline_tokens(root / "target"))

    return setup


def packed_drafting_matches_unpacked(setup: DraftingSetup, spec: Mapping[str, Any], monkeypatch: Any) -> None:
    """In bf16, drafting with the engine's pre-packed drafter (``SpeculatorContext.prepare_module``)
    emits the tokens and draft/accept counts of the unpacked one, and is packed where this CPU
    packs bf16 (``specpath_engine.packed_linear``: the same products as ``F.linear``, to the bit)."""
    from specpath_engine.packed_linear import ENV_SWITCH, PackedLinear, packing_enabled

    prompts = [list(p) for p in TINY_PROMPTS]
    spec = {**spec, "draft_length_policy": "fixed"}  # adaptive K follows timings: counts would vary run to run
    monkeypatch.setenv(ENV_SWITCH, "0")
    plain = setup.llm(spec, dtype="bfloat16")
    monkeypatch.delenv(ENV_SWITCH)
    packed = setup.llm(spec, dtype="bfloat16")
    want, got = plain.generate(prompts, greedy()), packed.generate(prompts, greedy())
    assert [o.token_ids for o in got] == [o.token_ids for o in want]
    counts = lambda outs: [(o.metrics.num_draft_tokens, o.metrics.num_accepted_tokens) for o in outs]  # noqa: E731
    assert counts(got) == counts(want) and sum(d for d, _ in counts(got)) > 0
    module = getattr(packed.speculator, "head", None) or packed.speculator.drafter
    assert any(isinstance(m, PackedLinear) for m in module.modules()) == packing_enabled(torch.bfloat16)


def quantized_drafting_keeps_the_output(setup: DraftingSetup, spec: Mapping[str, Any], method: str = "int8") -> None:
    """With ``speculative_config.quantization`` the engine holds the drafter's matrices weight-only
    quantised (:mod:`specpath_engine.quantization`); drafts still come, and greedy output is the
    plain target's (float32: the quantised kernels take no float64)."""
    from specpath_engine.quantization import Int4Linear, Int8Linear

    prompts = [list(p) for p in TINY_PROMPTS]
    want = [o.token_ids for o in setup.llm(None, dtype="float32").generate(prompts, greedy())]
    engine = setup.llm({**spec, "quantization": method}, dtype="float32")
    got = engine.generate(prompts, greedy())
    assert [o.token_ids for o in got] == want
    assert sum(o.metrics.num_draft_tokens for o in got) > 0
    speculator = engine.speculator
    module = next(m for m in (getattr(speculator, n, None) for n in ("head", "drafter", "model")) if m is not None)
    kinds = {type(m) for m in module.modules()}
    assert (Int8Linear if method == "int8" else Int4Linear) in kinds and torch.nn.Linear not in kinds


def native_propose_matches_per_op(spec: Mapping[str, Any], prompts: Sequence[str | Sequence[int]], *,
                                  model: str | None = None, max_tokens: int = 32, seed: int | None = None) -> int:
    """bf16, one sequence at a time (where a hidden-state speculator proposes in one native call,
    its ingest included): every propose returns the drafts of the per-op path (the native propose
    switched off on a second engine), and the output is the same; returns how many proposes ran
    natively (the caller asserts it is more than none). ``seed``: seeded sampling (temperature
    0.8), whose drafts race on the request's noise, instead of greedy."""
    from specpath_engine.llm import LLM, SamplingParams

    params = (SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True) if seed is None else
              SamplingParams(temperature=0.8, max_tokens=max_tokens, seed=seed, ignore_eos=True))
    runs = []
    for native in (True, False):
        llm = LLM(model, dict(spec), dtype="bfloat16", num_threads=1, max_num_seqs=1)
        speculator, drafts, ran = llm.speculator, [], []
        propose, native_propose = speculator.propose, speculator._native_propose
        speculator.native_propose = native

        def recording(batch, propose=propose, drafts=drafts):
            out = propose(batch)
            drafts.append(out.token_ids.tolist())
            return out

        def counting(batch, native_propose=native_propose, ran=ran):
            out = native_propose(batch)
            ran.append(out is not None)
            return out

        speculator.propose, speculator._native_propose = recording, counting
        outputs = [o.token_ids for o in llm.generate([p if isinstance(p, str) else list(p) for p in prompts], params)]
        runs.append((outputs, drafts, sum(ran)))
    (got, got_drafts, natively), (want, want_drafts, per_op) = runs
    assert per_op == 0 and len(got_drafts) > 0 and got_drafts == want_drafts and got == want
    return natively


def batched_native_propose_keeps_greedy_output(spec: Mapping[str, Any], prompts: Sequence[str | Sequence[int]], *,
                                               model: str | None = None, max_tokens: int = 32) -> int:
    """bf16 greedy, every prompt at once (``max_num_seqs`` = their number; where a hidden-state
    speculator proposes for a batch in one native call): the output is plain decoding's and the
    per-op path's (the native propose switched off), with drafts verified; returns how many
    proposes of more than one request ran as one native call (the caller asserts it is more than
    none where the kernels run)."""
    from specpath_engine.llm import LLM, SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    batch = [p if isinstance(p, str) else list(p) for p in prompts]
    options = dict(dtype="bfloat16", num_threads=1, max_num_seqs=len(batch))
    plain = [o.token_ids for o in LLM(model, None, **options).generate(batch, params)]
    runs = []
    for native in (True, False):
        llm = LLM(model, dict(spec), **options)
        speculator, ran = llm.speculator, []
        speculator.native_propose = native
        native_batch = speculator._native_propose_batch

        def counting(batch, native_batch=native_batch, ran=ran):
            out = native_batch(batch)
            ran.append(out is not None and len(batch.requests) > 1)
            return out

        speculator._native_propose_batch = counting
        runs.append(([o.token_ids for o in llm.generate(batch, params)], sum(ran), llm.metrics.num_draft_tokens))
    (got, batched, drafted), (want, per_op, _) = runs
    assert got == plain and want == plain and per_op == 0 and drafted > 0
    return batched


class DualWeightDrafting(NamedTuple):
    """What :func:`dual_weight_drafting` saw."""

    tile_bytes: int
    """Bytes of AMX-tile copies kept beside the drafter's int8 weights (0: none)."""
    batch_passes: tuple[int, int]
    """Dual-weight passes of the batched run: (on the int8 kernel, on the tiles)."""
    lone_passes: tuple[int, int]
    """The same for one request at a time."""


def tile_copy_bytes(speculator: Any) -> int:
    """Bytes of AMX-tile copies the speculator's drafter keeps (over every module it holds, the
    native form's LM-head rows included): only the weights its native propose reads have them."""
    native_head = getattr(speculator, "_chain_head", None)
    owners = [linear.owner() for linear in getattr(native_head, "linears", ())]
    modules = {id(m): m for m in [*speculator.head.modules(), *(o for o in owners if o is not None)]}
    return sum(m.tiled_levels.numel() * m.tiled_levels.element_size() for m in modules.values()
               if hasattr(m, "tiled_levels"))


def dual_weight_drafting(spec: Mapping[str, Any], prompts: Sequence[str | Sequence[int]], *,
                         model: str | None = None, max_tokens: int = 24) -> DualWeightDrafting:
    """bf16 greedy with the spec's drafter: every prompt at once (``max_num_seqs`` = their number),
    then the first alone; each output is plain decoding's. Returns the drafter's tile-copy bytes
    and which kernel the dual-weight passes took in each run (``NativeKernels.dual_weight_passes``)."""
    from specpath_engine.llm import LLM, SamplingParams
    from specpath_engine.modeling.native import kernels

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    batch = [p if isinstance(p, str) else list(p) for p in prompts]
    native, runs, tile_bytes = kernels(), [], 0
    for requests in (batch, batch[:1]):
        options = dict(dtype="bfloat16", num_threads=1, max_num_seqs=len(requests))
        plain = [o.token_ids for o in LLM(model, None, **options).generate(requests, params)]
        llm = LLM(model, dict(spec), **options)
        tile_bytes = max(tile_bytes, tile_copy_bytes(llm.speculator))
        before = native.dual_weight_passes() if native is not None else (0, 0)
        assert [o.token_ids for o in llm.generate(requests, params)] == plain
        after = native.dual_weight_passes() if native is not None else (0, 0)
        runs.append((after[0] - before[0], after[1] - before[1]))
    return DualWeightDrafting(tile_bytes, *runs)


def check_every_proposal(speculator: Any, want: Callable[[Any, int], list[int]]) -> list[int]:
    """Wrap ``speculator.propose`` so each request's drafts are compared, as they are proposed,
    with ``want(request, n)``; returns the (growing) list of the draft counts checked."""
    propose, checked = speculator.propose, []

    def checking(batch):
        proposal = propose(batch)
        flat, start = proposal.token_ids.tolist(), 0
        for r, n in zip(batch.requests, proposal.num_draft_tokens):
            if n:
                assert flat[start:start + n] == want(r, n), f"request {r.req_id} at length {len(r.token_ids)}"
                checked.append(n)
            start += n
        return proposal

    speculator.propose = checking
    return checked


def drafting_target(path: str | Path | None = None, *, seed: int = 0, vocab_size: int = 64, num_layers: int = 4,
                    hidden_size: int = 32, max_len: int = 256, dtype: torch.dtype = torch.float64) -> Any:
    """The hidden-state drafters' test target: a random-weight Llama (float64 by default, so no
    near-tie can flip a greedy choice), saved to ``path`` when given so configs can resolve
    against it."""
    from specpath_engine.testing.engine import random_llama, save_with_byte_tokenizer

    model = random_llama(seed, vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers, max_len=max_len,
                         head_scale=6.0, rms_norm_eps=1e-5)
    if path is not None:
        save_with_byte_tokenizer(model, path)
    return model.to(dtype).eval()


def random_head(head_class: type[HiddenStateHead], target: Any, path: str | Path, *, seed: int = 0,
                parallel_drafting: bool = False, draft_vocab_size: int | None = None,
                aux_layer_ids: Sequence[int] | None = None) -> Path:
    """Write a random-weight head of ``head_class`` (its ``kind``: ``eagle``, ``eagle3``) shaped
    for ``target``."""
    kind = head_class.kind
    tc = target.config.to_hf_dict()
    overrides: dict[str, Any] = {}
    if kind == "eagle3":
        overrides = dict(parallel_drafting=parallel_drafting, draft_vocab_size=draft_vocab_size,
                         aux_layer_ids=None if aux_layer_ids is None else tuple(aux_layer_ids))
    config = HeadConfig.for_target(kind, tc, **overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = head_class(config)
        with torch.no_grad():
            for name, p in head.named_parameters():
                if p.dim() == 1 and "norm" not in name:
                    p.normal_(0, 1.0)  # mask vectors: not all-zero
        if kind == "eagle3" and draft_vocab_size is not None:
            ids = torch.randperm(config.vocab_size)[:draft_vocab_size].sort().values
            head.set_vocab_map(ids)
    return save_head(head, path)


def context_for(model: Any, *, max_num_seqs: int = 8, max_model_len: int | None = None) -> Any:
    """The ``SpeculatorContext`` an engine lends (``specpath_engine.llm_engine.speculator_context``)."""
    from specpath_engine.llm_engine import speculator_context

    return speculator_context(model, max_num_seqs=max_num_seqs, max_model_len=max_model_len)


def make_engine(model: Any, spec: Any, *, prefix_caching: bool = False, max_num_seqs: int = 4,
                max_num_batched_tokens: int = 48, block_size: int = 16, num_blocks: int | None = None,
                max_model_len: int | None = None, speculator: Any = None) -> Any:
    """An ``LLMEngine`` over ``model`` speculating with the resolved ``spec`` (or plain, when None),
    built the way ``LLM`` builds one (``LLMEngine.from_config``)."""
    from specpath.config.engine import EngineConfig
    from specpath.config.model import CacheConfig, SchedulerConfig
    from specpath_engine.llm_engine import LLMEngine

    engine_config = EngineConfig(
        speculative_config=spec,
        cache_config=CacheConfig(block_size=block_size, num_blocks=num_blocks, enable_prefix_caching=prefix_caching),
        scheduler_config=SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens),
    )
    return LLMEngine.from_config(model, engine_config, speculator=speculator, max_model_len=max_model_len)


def resolve(fields: Mapping[str, Any], target_path: str | Path | None = None) -> Any:
    """Resolve a speculative config, against the target checkpoint when given."""
    from specpath.config.model import ModelConfig
    from specpath.config.speculative import SpeculativeConfig

    target = None if target_path is None else ModelConfig(model=str(target_path))
    return SpeculativeConfig.from_dict(dict(fields), target_model_config=target)


@torch.inference_mode()
def reference_drafts(head: HiddenStateHead, target: Any, token_ids: Sequence[int], layers: Sequence[int], k: int,
                     *, parallel: bool = False) -> list[int]:
    """The greedy drafts ``head`` should propose after ``token_ids`` (last one pending),
    computed from scratch with the training rollout (no KV cache): an independent check of
    the incremental drafting loop."""
    from specpath_drafting.rollout import depth_pass

    n = len(token_ids)
    ids = torch.tensor(list(token_ids) + [0] * (k + 1), dtype=torch.int64)
    p = n - 1 + k  # positions 0 .. n-2 are real, the rest hold the chain
    taps = target.forward(ids[: n - 1], torch.arange(n - 1), hidden_layers=tuple(layers)).hidden_states
    g = head.fuse(taps.to(head.dtype))
    feats = torch.cat([g, g.new_zeros(p - (n - 1), g.shape[-1])])[None]
    cos, sin = head.rope(torch.arange(p))
    drafts: list[int] = []
    cache: list = []
    a = None
    for j in range(k):
        if j == 0:
            embeds = head.embed(ids[1:p + 1])[None].to(head.dtype)
            inputs = feats
        elif parallel:
            embeds = head.mask_embeds(p)[None].to(head.dtype)
            inputs = head.mask_features(p)[None].to(head.dtype)
        else:
            embeds = head.embed(ids[1:p + 1])[None].to(head.dtype)
            inputs = torch.cat([a[:, :1] * 0, a[:, :-1]], dim=1)
        a_j = depth_pass(head, embeds, inputs, cos, sin, cache)
        if j == 0 or not parallel:
            a = a_j
        token = int(head.to_target(head.logits(a_j[0, n - 2 + j]).argmax(-1)))
        drafts.append(token)
        ids[n + j] = token
    return drafts


def drafts_equal_a_from_scratch_computation(setup: DraftingSetup, spec_fields: Mapping[str, Any],
                                            want: Callable[[Any, Any, int], list[int]], *, repeat: bool = True,
                                            **engine_options: Any) -> tuple[Any, list[Any]]:
    """Greedy-decode :data:`TINY_PROMPTS` (and, with ``repeat``, the first two again: prefix-cache
    hits) through ``make_engine`` with prefix caching, checking every proposal against
    ``want(speculator, request, n)`` as it is made; the outputs must equal the baseline and more
    than 20 proposals must have been checked. ``engine_options`` override the engine's small
    defaults (24 tokens a step, blocks of 8, 80-token context). Returns the speculator and the
    finished requests."""
    # K every step: every proposal is checked (the measured policy may back off on a tiny target)
    spec = resolve({"draft_length_policy": "fixed", **spec_fields}, setup.root / "target")
    options = {"max_num_batched_tokens": 24, "block_size": 8, "max_model_len": 80, **engine_options}
    engine = make_engine(setup.target, spec, prefix_caching=True, **options)
    speculator = engine.runner.speculator
    checked = check_every_proposal(speculator, lambda r, n: want(speculator, r, n))
    prompts, baseline = (TINY_PROMPTS + TINY_PROMPTS[:2], setup.baseline + setup.baseline[:2]) if repeat else (
        TINY_PROMPTS, setup.baseline)
    requests, _ = engine.generate(prompts, greedy())
    assert [r.output_token_ids for r in requests] == baseline
    assert len(checked) > 20, checked
    return speculator, requests


def chi_square_of_two_tokens(tmp_path: Path, spec_fields: Mapping[str, Any], make_drafter: Callable[[Path, Any], Any],
                             *, num_layers: int, head_scale: float = 0.25, seed: int = 11) -> None:
    """Random drafts at temperature 1 on a 6-token target: the (2nd, 3rd) output tokens, which
    pass through speculative verification, must follow the target's exact joint distribution
    (chi-square at the 0.999 quantile). ``make_drafter(target_path, target)`` writes the drafter."""
    from specpath_engine.llm import LLM
    from specpath_engine.request import SamplingParams

    vocab = 6
    target = drafting_target(tmp_path / "t", vocab_size=vocab, num_layers=num_layers, hidden_size=16)
    with torch.no_grad():
        target.lm_head.weight.mul_(head_scale)  # back to spread-out distributions
    target.save_pretrained(tmp_path / "t")
    drafter = make_drafter(tmp_path / "t", target)
    prompt = [1, 2, 3]
    engine = LLM(str(tmp_path / "t"), {"model": str(drafter), "num_speculative_tokens": 3,
                                       "draft_sample_method": "random", "draft_length_policy": "fixed", **spec_fields},
                 num_threads=1, max_num_seqs=64, seed=seed)
    n = 1200
    outputs = engine.generate([prompt] * n, SamplingParams(temperature=1.0, max_tokens=3, ignore_eos=True))
    assert engine.metrics.num_draft_tokens > 0 and engine.metrics.num_accepted_tokens > 0
    counts = torch.zeros(vocab, vocab, dtype=torch.float64)
    for o in outputs:
        counts[o.token_ids[1], o.token_ids[2]] += 1
    target = target.double()
    with torch.no_grad():
        p1 = torch.softmax(target(torch.tensor(prompt), torch.arange(3)).logits[-1], -1)
        one = torch.tensor([prompt + [a] for a in range(vocab)])
        p2 = torch.softmax(target.forward_batch(one)[:, 3].double(), -1)
        two = torch.tensor([prompt + [a, b] for a in range(vocab) for b in range(vocab)])
        p3 = torch.softmax(target.forward_batch(two)[:, 4].double(), -1).view(vocab, vocab, vocab)
    joint = torch.einsum("a,ab,abc->bc", p1.double(), p2, p3)  # P(t2, t3)
    expected = joint * n
    keep = expected >= 5
    chi2 = float((((counts - expected) ** 2) / expected)[keep].sum())
    dof = int(keep.sum()) - 1
    critical = dof * (1 - 2 / (9 * dof) + 3.09 * (2 / (9 * dof)) ** 0.5) ** 3  # 0.999 quantile (Wilson-Hilferty)
    assert chi2 < critical, (chi2, critical, dof)


def train_steps(loss_fn: Callable, model: torch.nn.Module, tokens: torch.Tensor, taps: torch.Tensor, *,
                steps: int = 30, lr: float = 3e-3) -> tuple[float, float, dict]:
    """``(loss before, loss after, metrics after)`` of ``steps`` Adam steps of ``loss_fn`` on one
    fixed batch: a recipe's loss must be able to lower itself."""
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    with torch.no_grad():
        before, _ = loss_fn(tokens, taps)
    for _ in range(steps):
        loss, _ = loss_fn(tokens, taps)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        after, info = loss_fn(tokens, taps)
    return float(before), float(after), info


def config_variant(checkpoint: str | Path, path: str | Path, **changes: Any) -> Path:
    """A directory holding ``checkpoint``'s ``config.json`` with ``changes`` (no weights:
    enough for a configuration to resolve, or to be refused)."""
    import json

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = json.loads((Path(checkpoint) / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, **changes}))
    return path


def with_train_vocab(checkpoint: str | Path, path: str | Path, ids: Sequence[int]) -> Path:
    """A copy of the drafter ``checkpoint`` whose training record says its logits were trained
    on ``ids`` only (what ``--train-vocab`` recipes write), for the serving restriction."""
    import json
    import shutil

    path = Path(path)
    shutil.copytree(checkpoint, path)
    config = json.loads((path / "config.json").read_text())
    config["specpath_training"] = {**config.get("specpath_training", {}), "train_vocab_ids": [int(i) for i in ids]}
    (path / "config.json").write_text(json.dumps(config))
    return path


def masked_head(lm_head: Callable[[torch.Tensor], torch.Tensor], ids: Sequence[int]) -> Callable[[torch.Tensor], torch.Tensor]:
    """``lm_head`` with the logits outside ``ids`` at -inf, computed over the whole head: the
    plain reference of :class:`specpath_drafting.vocab.RestrictedLMHead`."""
    def head(h: torch.Tensor) -> torch.Tensor:
        full = lm_head(h).float()
        out = torch.full_like(full, float("-inf"))
        out[..., list(ids)] = full[..., list(ids)]
        return out

    return head


SMOLLM2_135M_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 49152, "hidden_size": 576,
    "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
    "head_dim": 64, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 100000.0,
    "tie_word_embeddings": True, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2,
    "torch_dtype": "float32",
}
"""SmolLM2-135M-Instruct's config.json (architecture only): enough to resolve configurations."""


def smollm2_config_dir(path: str | Path) -> Path:
    """A directory holding only SmolLM2-135M's config.json (no weights), for resolution tests."""
    import json

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(SMOLLM2_135M_CONFIG))
    return path
