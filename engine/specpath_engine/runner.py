"""One engine step: drafts, one target pass that prefills and verifies, acceptance, rollback.

For each scheduled request the step's flattened batch holds its uncomputed tokens (a prefill
chunk, or the last sampled token) followed by the drafts the speculator proposed for it. One
target forward over the whole batch writes their KV and yields logits at every position that
decides a token. ``specpath_engine.sample.rejection_sample`` keeps the accepted prefix of each request's
drafts plus one corrected or bonus token; the request's KV pointer then moves past the accepted
positions only (rejected entries are overwritten later: rollback is a pointer move).

A seeded sampling request (standard verification) is verified by the race instead
(``specpath_engine.sample.race``): its tokens are plain decoding's whatever was drafted, and its
sampling noise is lent to the drafter (``DraftRequest.noise``) so its drafts race on it too.

The runner reads the speculator's capabilities (``uses_target_hidden_states``, its
``hidden_state_layers``), never its method name.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from specpath_engine.attention import PagedAttention, build_attention_metadata
from specpath_engine.draft_governor import DraftGovernor
from specpath_engine.draft_worth import accepted_nodes, worth_of_chain, worth_of_tree
from specpath_engine.kv_cache import FeatureStore, KVCache
from specpath_engine.request import Request
from specpath_engine.sampling import sample_tokens
from specpath_engine.sample.greedy import GREEDY_PREFIX_METHODS, accept_greedy_chains, greedy_ids
from specpath_engine.sample.randomness import draft_generator, position_generator
from specpath_engine.scheduler import ScheduledRequest, Scheduler, SchedulerOutput
from specpath_engine.spec_decode_metadata import SpecDecodeMetadata
from specpath_engine import tree_layout
from specpath.catch_up import handed_over
from specpath.speculator import BaseSpeculator, DraftBatch, DraftRequest


class ModelRunner:
    """Executes scheduled steps against the model, the paged cache and the speculator.

    Args:
        model: a decoder with the ``forward(input_ids, positions, attention, *, hidden_layers,
            logits_indices)`` interface of ``specpath_engine.model``.
        scheduler: owns the requests and blocks; finished requests are retired through it.
        kv_cache: the paged KV storage the block manager's ids index.
        speculator: the method's drafter, or None for plain decoding.
        uses_target_hidden_states: the speculator's config flag; its ``hidden_state_layers`` are
            then stored per slot and handed over for every newly committed position.
        verify_method / verify_options: ``rejection_sample``'s mode and options.
        verify_trees: verify ``DraftProposal.tree`` where the mode allows (``tree_layout``).
        governor: chooses the step's draft lengths (``draft_governor``) from measured costs: the
            runner times the drafter's call and the target step (one clock pair each) and feeds
            them back; None: the scheduler's K.
        skips_backed_off: hand a request to the drafter only in steps where it drafts, prefill
            steps and back-offs included (the speculator's ``tolerates_skipped_steps``); it then
            catches up on every position since in one call. Else it ingests every step, drafting 0.
        catch_up_window: the most positions such a catch-up hands over (the speculator is wrapped
            in :class:`specpath.catch_up.CatchUpWindow`; a prompt is handed over whole); 0: all of
            them. The cost model prices what is handed over.
        tokenizer: decodes output for stop strings (optional).
    """

    def __init__(
        self,
        model: Any,
        scheduler: Scheduler,
        kv_cache: KVCache,
        *,
        speculator: BaseSpeculator | None = None,
        uses_target_hidden_states: bool = False,
        verify_method: str = "standard",
        verify_options: dict | None = None,
        verify_trees: bool = True,
        governor: DraftGovernor | None = None,
        skips_backed_off: bool = False,
        catch_up_window: int = 0,
        tokenizer: Any = None,
        device: str | torch.device = "cpu",
    ) -> None:
        self.model = model
        self.scheduler = scheduler
        self.cache = kv_cache
        self.block_size = kv_cache.block_size
        self.speculator = speculator
        self.verify_method = verify_method
        self.verify_options = dict(verify_options or {})
        self.verifies_trees = tree_layout.verifies_trees(verify_method, verify_trees)
        """Whether ``DraftProposal.tree`` is verified (standard verification); the speculator's
        ``SpeculatorContext.verifies_trees`` must say the same (``LLM`` builds both from one rule)."""
        self.greedy_on_host = verify_method in GREEDY_PREFIX_METHODS and not self.verify_options
        """Greedy chains are verified by :func:`~specpath_engine.sample.greedy.accept_greedy_chains`
        (exactly what ``rejection_sample`` computes for them, without its tensor set-up)."""
        self.couples = verify_method == "standard" and not self.verify_options
        """Seeded sampling requests are verified by the race (``specpath_engine.sample.race``), so
        their tokens are plain decoding's; the other modes keep their own rules."""
        self._trees: list[tree_layout.Tree | None] = []
        self.draft_floors = True
        """Drafts stop, and are cut, where the drafter's own estimates stop paying (``draft_worth``);
        False: every draft of the budget is made and verified (for side-by-side measurements)."""
        self._estimates: list[tuple | None] = []
        """Per scheduled request, the path chances the drafter gave its verified drafts (and
        whether they are a tree's nodes), or None: for the governor's calibration."""
        self.governor = governor
        self.skips_backed_off = skips_backed_off
        self.catch_up_window = catch_up_window if skips_backed_off else 0
        self._draft_budget: list[int] = []
        """This step's draft length per scheduled request, after the governor."""
        self._drafter_features: tuple[float, ...] | None = None
        """This step's drafter call for the cost model (None: not called)."""
        self._drafter_s = 0.0
        self.step_rows = 0
        """Target rows the last step ran (its scheduled tokens and drafts; 0: nothing ran)."""
        self.step_drafted = False
        """The last step called the drafter: that call comes and goes with the governor's
        choices, so a per-step timer of the machine tells such steps apart."""
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.vocab_size = model.config.vocab_size
        self.num_query_groups = model.config.num_attention_heads // model.config.num_key_value_heads
        self.hidden_layers: tuple[int, ...] = ()
        self.features: FeatureStore | None = None
        if speculator is not None and uses_target_hidden_states:
            self.hidden_layers = tuple(speculator.hidden_state_layers)
            if not self.hidden_layers:
                raise ValueError(
                    f"{type(speculator).__name__} declares uses_target_hidden_states but its "
                    "hidden_state_layers is empty"
                )
            self.features = FeatureStore(
                num_slots=kv_cache.num_slots,
                num_layers=len(self.hidden_layers),
                hidden_size=model.config.hidden_size,
                dtype=kv_cache.data.dtype,
                device=self.device,
            )
        self.num_forward_calls = 0

    # ------------------------------------------------------------------------------ drafts
    def _slots_at(self, request: Request, positions: Sequence[int]) -> list[int]:
        """The KV slots of ``request``'s ``positions`` (through its block table)."""
        bs, blocks = self.block_size, request.table.block_ids
        return [blocks[p // bs] * bs + p % bs for p in positions]

    def _propose(self, scheduled: Sequence[ScheduledRequest]) -> tuple[list[list[int]], torch.Tensor | None]:
        """Drafts per scheduled request (empty lists when none) and their probabilities."""
        drafts: list[list[int]] = [[] for _ in scheduled]
        speculator = self.speculator
        if speculator is None:
            return drafts, None
        budget = self._draft_budget = self._budgets(scheduled)
        feeding = self.features is not None
        # Where the drafter tolerates skipped steps, a request is handed over only in a step where
        # it drafts (lazy ingest): its prompt and every position since (their hidden states, kept
        # per slot) reach the drafter in one go then, so a request that never drafts costs the
        # drafter nothing. Otherwise a request with new positions is handed them every step.
        lazy = self.skips_backed_off
        picked = [
            i
            for i, (s, k) in enumerate(zip(scheduled, budget))
            if k > 0 or (feeding and not lazy and s.request.num_computed_tokens > s.request.num_delivered_positions)
        ]
        if not picked:
            return drafts, None
        governor = self.governor
        start = governor.clock() if governor is not None else 0.0
        self._trees = [None] * len(scheduled)
        self._estimates = [None] * len(scheduled)
        # where the drafter's own estimates stop paying (draft_worth): a pass's and a row's floors
        calibration = governor.calibration if governor is not None else None
        floors = governor.floors if calibration is not None and self.draft_floors else (0.0, 0.0)
        floor = calibration.least_estimate(floors[0]) if floors[0] > 0 else 0.0
        chance = calibration.chance if calibration is not None else None
        entries, slots = [], []
        for i in picked:
            r = scheduled[i].request
            if feeding:  # the hidden states of the positions it is handed (before they count as delivered)
                slots.extend(self._slots_at(r, range(r.num_delivered_positions, r.num_computed_tokens)))
            entries.append(self._draft_request(r, budget[i], floor))
        hidden = None
        if feeding:
            hidden = self.features.read(torch.tensor(slots, dtype=torch.int64, device=self.device))
        proposal = speculator.propose(DraftBatch(requests=tuple(entries), hidden_states=hidden))
        self.step_drafted = True
        drafter_s = governor.clock() - start if governor is not None else 0.0
        counts, flat = self._checked(proposal, len(entries))
        name = type(speculator).__name__
        probs = proposal.draft_probs if flat else None
        budgets = [e.max_draft_tokens for e in entries]
        trees = [None] * len(entries)
        row_floor = floors[1]
        if self.verifies_trees and proposal.tree is not None:
            if chance is not None and probs is None:  # nodes not worth their rows are not verified
                budgets = self._tree_worth(proposal.tree, picked, budgets, chance, row_floor)
            trees = tree_layout.take_trees(proposal.tree, len(entries), budgets, self.vocab_size, name)
        confidences = None
        if proposal.confidences is not None and probs is None and chance is not None:
            confidences = proposal.confidences.tolist()
        if governor is not None:  # the drafter's call, for the cost model (step_costs.DRAFT_FEATURES)
            self._drafter_s = drafter_s
            # what it drafted (a drafter may stop short of its budget where its drafts stop paying)
            ks = [b if t is not None else min(n, b) for n, b, t in zip(counts, budgets, trees) if b > 0]
            passes = (1 if governor.one_pass else max(ks)) if ks else 0
            window = self.catch_up_window
            handed = sum(handed_over(len(e.token_ids) - 1 - e.num_new_positions, e.num_new_positions, window)
                         for e in entries)
            self._drafter_features = (1.0, len(ks), passes, sum(ks), handed)
        # The runner trims drafts to each request's budget itself (a per-step K needs nothing
        # from the speculator): keep the first max_draft_tokens of each request, and of a chain
        # the drafter estimated, those worth their rows (draft_worth). A request with a tree puts
        # its nodes where the chain would go (and drops the chain's rows).
        kept_rows: list[int] = []
        start = 0
        for i, n, e, tree in zip(picked, counts, entries, trees):
            keep = min(n, e.max_draft_tokens)
            if confidences is not None and tree is None and keep:
                keep, paths = worth_of_chain(confidences[start : start + keep], chance, row_floor)
                self._estimates[i] = (paths, False)
            if tree is not None:
                drafts[i] = tree.tokens
                if probs is not None or tree.branches:
                    self._trees[i] = tree
                # else: a tree without branches is verified as a one-hot chain (no tree layout)
            else:
                drafts[i] = flat[start : start + keep]
                kept_rows.extend(range(start, start + keep))
            start += n
        if probs is not None and kept_rows and len(kept_rows) != len(flat):
            probs = probs.index_select(0, torch.tensor(kept_rows, dtype=torch.int64, device=probs.device))
        return drafts, probs if kept_rows else None

    def _tree_worth(self, tree: Any, picked: Sequence[int], budgets: list[int], chance: Any,
                    floor: float) -> list[int]:
        """Each request's tree budget cut to the nodes worth their rows (``draft_worth``); the kept
        nodes' path chances are kept for the calibration."""
        probs, parents, sizes = list(tree.probs), list(tree.parents), [int(n) for n in tree.num_tree_tokens]
        if len(probs) != sum(sizes) or len(parents) != sum(sizes) or len(sizes) != len(budgets):
            return budgets  # take_trees says what is wrong
        cut, start = list(budgets), 0
        for j, (i, n) in enumerate(zip(picked, sizes)):
            m = min(n, budgets[j])
            if m:
                cut[j], paths = worth_of_tree(probs[start : start + m], parents[start : start + m], chance, floor)
                self._estimates[i] = (paths, True)
            start += n
        return cut

    def _budgets(self, scheduled: Sequence[ScheduledRequest]) -> list[int]:
        """Each request's draft length this step: the scheduler's K, or the governor's choice for
        the whole step (a plain step it chooses is counted in the request's ``num_backoff_steps``)."""
        governor = self.governor
        if governor is None:
            return [s.max_draft_tokens for s in scheduled]
        feeding = self.features is not None
        skips = self.skips_backed_off
        window = self.catch_up_window
        ids, limits, positions, pending, generated, sampled = [], [], [], [], [], []
        sampling = prefill = 0
        sunk = False
        for s in scheduled:
            r = s.request
            behind = r.num_computed_tokens - r.num_delivered_positions
            sampling += s.samples
            prefill += s.num_new_tokens - 1
            if s.max_draft_tokens > 0:
                ids.append(r.req_id)
                limits.append(s.max_draft_tokens)
                positions.append(len(r.token_ids))
                generated.append(len(r.token_ids) - r.num_prompt_tokens)
                sampled.append(r.params.temperature > 0)
                pending.append(handed_over(r.num_delivered_positions, behind, window) if skips or not feeding else 0)
            sunk = sunk or (feeding and behind > 0 and not skips)
        chosen = governor.allocate(ids, limits, positions, pending, num_requests=len(scheduled),
                                   num_sampling=sampling, prefill_rows=prefill, call_sunk=sunk,
                                   generated=generated, sampled=sampled) if ids else []
        budget, it = [], iter(chosen)
        for s in scheduled:
            k = next(it) if s.max_draft_tokens > 0 else 0
            if k == 0 and s.max_draft_tokens > 0:
                s.request.metrics.num_backoff_steps += 1
            budget.append(k)
        return budget

    def _draft_request(self, r: Request, budget: int, floor: float = 0.0) -> DraftRequest:
        """``r``'s view of this step (its new positions are handed over: delivered); ``floor``:
        its ``min_draft_probability``."""
        computed = r.num_computed_tokens
        ids = r.token_ids if computed + 1 == len(r.token_ids) else r.token_ids[: computed + 1]
        entry = DraftRequest(
            req_id=r.req_id,
            token_ids=ids,
            num_new_positions=computed - r.num_delivered_positions,
            max_draft_tokens=budget,
            min_draft_probability=floor if budget > 0 else 0.0,
            temperature=r.params.temperature,
            # fresh each step, keyed by (seed, position): never by how often it drafted before
            generator=None if r.generator is None else draft_generator(r.seed, len(ids), self.device),
            noise=r.noise if self._coupled(r) else None,
        )
        r.num_delivered_positions = computed
        return entry

    def _coupled(self, r: Request) -> bool:
        """Whether ``r``'s tokens are race winners on its seeded noise (drafts and verification)."""
        return r.noise is not None and self.couples

    def _checked(self, proposal: Any, num_requests: int) -> tuple[list[int], list[int]]:
        """(drafts per request, the flat drafts) of a proposal, or one line on what is wrong with it."""
        counts = [int(n) for n in proposal.num_draft_tokens]
        name = type(self.speculator).__name__
        if len(counts) != num_requests or min(counts, default=0) < 0:
            raise ValueError(f"{name}.propose returned draft counts {counts} for {num_requests} requests")
        flat = proposal.token_ids.tolist() if sum(counts) else []
        if len(flat) != sum(counts):
            raise ValueError(f"{name}.propose returned {len(flat)} draft tokens, num_draft_tokens sums to {sum(counts)}")
        if flat and (min(flat) < 0 or max(flat) >= self.vocab_size):
            raise ValueError(f"{name}.propose drafted token ids outside [0, {self.vocab_size})")
        return counts, flat

    # ------------------------------------------------------------------------------- step
    @torch.inference_mode()
    def execute(self, out: SchedulerOutput) -> list[Request]:
        """Run one scheduled step; returns the requests that finished in it."""
        speculator = self.speculator
        if speculator is not None:
            for r in out.preempted:
                speculator.remove_request(r.req_id)
        scheduled = out.scheduled
        self.step_rows, self.step_drafted = 0, False
        if not scheduled:
            return []
        self._trees, self._draft_budget, self._drafter_features, self._estimates = [], [], None, []
        drafts, draft_probs = self._propose(scheduled)
        governor = self.governor
        start = governor.clock() if governor is not None else 0.0
        trees = self._trees if any(t is not None for t in self._trees) else None

        spec_meta = SpecDecodeMetadata.build([s.num_new_tokens for s in scheduled], [s.samples for s in scheduled],
                                             drafts, trees, self.device)
        input_ids: list[int] = []
        for s, d in zip(scheduled, drafts):
            c = s.request.num_computed_tokens
            input_ids += s.request.token_ids[c : c + s.num_new_tokens]
            input_ids += d
        num_query = list(spec_meta.num_query_tokens)

        meta, positions = build_attention_metadata(
            block_tables=[s.request.table.block_ids for s in scheduled],
            num_computed=[s.request.num_computed_tokens for s in scheduled],
            num_query_tokens=num_query,
            block_size=self.block_size,
            num_query_groups=self.num_query_groups,
            device=self.device,
        )
        if trees is not None:
            meta, positions = tree_layout.apply_tree_attention(
                meta, positions, trees=trees, num_computed=[s.request.num_computed_tokens for s in scheduled],
                num_new=[s.num_new_tokens for s in scheduled], num_query=num_query,
                num_query_groups=self.num_query_groups)
        ids = torch.tensor(input_ids, dtype=torch.int64, device=self.device)
        self.step_rows = len(input_ids)
        # a step of prefill chunks only needs no logits: keep one row
        logits_index = torch.tensor(spec_meta.logits_indices or (0,), dtype=torch.int64, device=self.device)
        output = self.model.forward(
            ids,
            positions,
            PagedAttention(self.cache, meta),
            hidden_layers=self.hidden_layers,
            logits_indices=logits_index,
            # the features go straight to their slots (the native stack writes them in its call)
            hidden_store=None if self.features is None else (self.features.data, meta.slot_mapping),
        )
        self.num_forward_calls += 1

        sampling = spec_meta.sampling
        emitted = self._verify(scheduled, spec_meta, draft_probs, output.logits) if sampling else []
        if governor is not None:  # the target step, for the cost model (step_costs.TARGET_FEATURES)
            new = sum(s.num_new_tokens for s in scheduled)
            governor.observe_step(self._drafter_features, self._drafter_s,
                                  (1.0, len(scheduled), len(input_ids) - new, new - len(scheduled)),
                                  governor.clock() - start, sum(map(len, emitted)))

        for s in scheduled:
            s.request.num_computed_tokens += s.num_new_tokens
        finished = self._accept(scheduled, sampling, emitted, drafts)
        blocks = self.scheduler.blocks
        if blocks.enable_prefix_caching:
            for s in scheduled:
                r = s.request
                if not r.is_finished:
                    blocks.register_computed(r.table, r.token_ids, r.num_computed_tokens)
        if speculator is not None:
            for r in finished:
                speculator.remove_request(r.req_id)
                if self.governor is not None:
                    self.governor.remove(r.req_id)
        return finished

    def _accept(self, scheduled: Sequence[ScheduledRequest], sampling: Sequence[int], emitted: list[list[int]],
                drafts: list[list[int]]) -> list[Request]:
        """Move each sampling request past its accepted drafts, append its tokens, tell the
        speculator (and the governor) what was accepted; returns the requests that finished."""
        finished: list[Request] = []
        verified_ids, verified_counts = [], []
        now = time.perf_counter()
        for i, tokens in zip(sampling, emitted):
            r = scheduled[i].request
            accepted = len(tokens) - 1
            r.num_computed_tokens += accepted
            r.metrics.record_verification(len(drafts[i]), accepted)
            if self._draft_budget and self._draft_budget[i] > 0:
                verified_ids.append(r.req_id)
                verified_counts.append(accepted)
                if self.governor is not None:  # a tree: the depths it drafted (its nodes are rows)
                    tree = self._trees[i] if self._trees else None
                    self.governor.observe(r.req_id, len(drafts[i]) if tree is None else tree.depth, accepted)
                    if self._estimates and self._estimates[i] is not None:
                        self._calibrate(self._estimates[i], drafts[i], tree, tokens[:accepted])
            reason = self._append(r, tokens)
            if reason is not None:
                r.finish_time = now
                r.metrics.elapsed_s = now - r.arrival_time
                self.scheduler.finish(r, reason)
                finished.append(r)
        if self.speculator is not None and verified_ids:
            self.speculator.on_verified(verified_ids, verified_counts)
        return finished

    def _calibrate(self, estimates: tuple, drafts: list[int], tree: Any, emitted: list[int]) -> None:
        """Tell the governor's calibration which of a request's estimated drafts were accepted."""
        paths, is_tree = estimates
        if is_tree and tree is not None:  # a tree with branches: the nodes on the path the target took
            on = accepted_nodes(tree.tokens, tree.parents, emitted)
            for p, d, ok in zip(paths, tree_layout.depths(tree.parents), on):
                self.governor.calibration.observe(p, d, ok)
        else:  # a chain (or a tree verified as one): its first accepted drafts
            for j, p in enumerate(paths[: len(drafts)]):
                self.governor.calibration.observe(p, j, j < len(emitted))

    def _verify(self, scheduled: Sequence[ScheduledRequest], meta: SpecDecodeMetadata,
                draft_probs: torch.Tensor | None, logits: torch.Tensor) -> list[list[int]]:
        """Emitted tokens of each sampling request: accepted drafts then one new token. Requests
        with a tree are verified as trees, the others as chains (each on its own logits rows)."""
        if meta.trees is None:
            return self._verify_chains(scheduled, meta, draft_probs, logits)
        emitted: list[list[int]] = [[] for _ in meta.sampling]
        chain_at, tree_at = meta.chain_positions, meta.tree_positions
        if chain_at:
            chains = self._verify_chains(scheduled, meta.select(chain_at), draft_probs,
                                         logits.index_select(0, meta.logits_rows_of(chain_at)))
            for j, tokens in zip(chain_at, chains):
                emitted[j] = tokens
        from specpath_engine.sample.tree_verification import depths, verify_trees

        requests = [scheduled[meta.sampling[j]].request for j in tree_at]
        params = [r.params for r in requests]
        chosen = [meta.trees[j] for j in tree_at]
        coupled = [self._coupled(r) for r in requests]
        gens = [position_generator(r.seed, len(r.token_ids), self.device) if p.samples and not c else None
                for r, p, c in zip(requests, params, coupled)]
        noise = [r.noise.gumbel(len(r.token_ids), max(depths(t.parents), default=-1) + 2) if c else None
                 for r, t, c in zip(requests, chosen, coupled)]  # the root's row, then one per depth
        results = verify_trees([(t.tokens, t.parents) for t in chosen], logits.index_select(0, meta.logits_rows_of(tree_at)),
                               [p.temperature for p in params], [p.top_k for p in params] if any(p.top_k for p in params) else None,
                               [p.top_p for p in params] if any(p.top_p < 1 for p in params) else None, gens,
                               noise if any(coupled) else None)
        for j, tree, (path, final) in zip(tree_at, chosen, results):
            s = scheduled[meta.sampling[j]]
            r = s.request
            emitted[j] = [tree.tokens[n] for n in path] + [final]
            first = r.num_computed_tokens + s.num_new_tokens  # position (and slot order) of node 0
            tree_layout.compact_path(self.cache.data, None if self.features is None else self.features.data,
                                     self._slots_at(r, [first + n for n in path]),
                                     self._slots_at(r, [first + d for d in range(len(path))]))
        return emitted

    def _verify_chains(self, scheduled: Sequence[ScheduledRequest], meta: SpecDecodeMetadata,
                       draft_probs: torch.Tensor | None, logits: torch.Tensor) -> list[list[int]]:
        """Chains: seeded sampling requests by the race, the others by ``rejection_sample``;
        ``logits`` holds exactly ``meta``'s rows, ``draft_probs`` one row per draft (or None)."""
        requests = [scheduled[i].request for i in meta.sampling]
        coupled = [j for j, r in enumerate(requests) if self._coupled(r)]
        if not coupled:
            return self._rejection_chains(scheduled, meta, draft_probs, logits)
        from specpath_engine.sample.race import verify_chains

        drafts = [meta.draft_token_ids[j] for j in coupled]
        params = [requests[j].params for j in coupled]
        noise = torch.cat([requests[j].noise.gumbel(len(requests[j].token_ids), len(d) + 1)
                           for j, d in zip(coupled, drafts)])
        raced = verify_chains(drafts, logits.index_select(0, meta.logits_rows_of(coupled)),
                              [p.temperature for p in params], [p.top_k for p in params] if any(p.top_k for p in params) else None,
                              [p.top_p for p in params] if any(p.top_p < 1 for p in params) else None, noise)
        if len(coupled) == len(requests):
            return raced
        emitted: list[list[int]] = [[] for _ in requests]
        for j, tokens in zip(coupled, raced):
            emitted[j] = tokens
        taken = set(coupled)
        rest = [j for j in range(len(requests)) if j not in taken]
        if draft_probs is not None:  # the rest's rows (draft_probs has one per draft, requests in order)
            starts = [0]
            for d in meta.draft_token_ids:
                starts.append(starts[-1] + len(d))
            rows = [row for j in rest for row in range(starts[j], starts[j + 1])]
            draft_probs = draft_probs.index_select(0, torch.tensor(rows, dtype=torch.int64, device=draft_probs.device)) \
                if rows else None
        others = self._rejection_chains(scheduled, meta.select(rest), draft_probs,
                                        logits.index_select(0, meta.logits_rows_of(rest)))
        for j, tokens in zip(rest, others):
            emitted[j] = tokens
        return emitted

    def _rejection_chains(self, scheduled: Sequence[ScheduledRequest], meta: SpecDecodeMetadata,
                          draft_probs: torch.Tensor | None, logits: torch.Tensor) -> list[list[int]]:
        """Chains: ``rejection_sample`` over the accepted prefix, then the bonus token; ``logits``
        holds exactly ``meta``'s rows."""
        requests = [scheduled[i].request for i in meta.sampling]
        counts = meta.num_draft_tokens
        params = [r.params for r in requests]
        random_rows = [j for j, p in enumerate(params) if p.samples]
        if not random_rows and self.greedy_on_host:
            return accept_greedy_chains(meta.draft_token_ids, greedy_ids(logits).tolist())
        bonus_logits = logits.index_select(0, meta.bonus_logits_indices) if sum(counts) else logits
        if not random_rows:
            bonus = greedy_ids(bonus_logits)
            temperature = top_k = top_p = None
            generators = None
        else:
            dev = self.device
            temperature = torch.tensor([p.temperature for p in params], dtype=torch.float32, device=dev)
            top_k = torch.tensor([p.top_k for p in params], device=dev) if any(p.top_k for p in params) else None
            top_p = torch.tensor([p.top_p for p in params], device=dev) if any(p.top_p < 1 for p in params) else None
            # One generator per request and step, keyed by its seed and the position of the step's
            # first new token: the numbers never depend on the batch or on other requests' drafts.
            generators = [
                position_generator(r.seed, len(r.token_ids), dev) if p.samples else None
                for r, p in zip(requests, params)
            ]
            bonus = sample_tokens(bonus_logits, temperature, top_k, top_p, generators, random_rows)
        if not sum(counts):
            return [[t] for t in bonus.tolist()]

        from specpath_engine.sample import rejection_sample

        out = rejection_sample(
            meta.flat_draft_token_ids,
            counts,
            logits.index_select(0, meta.target_logits_indices),
            bonus.to(torch.int32),
            temperature if temperature is not None else torch.zeros(len(counts), device=self.device),
            draft_probs=draft_probs,
            generators=generators,
            top_k=top_k,
            top_p=top_p,
            method=self.verify_method,
            **self.verify_options,
        )
        return [[t for t in row if t >= 0] for row in out.tolist()]

    # ------------------------------------------------------------------------------ output
    def _append(self, r: Request, tokens: Sequence[int]) -> str | None:
        """Append verified tokens, stopping at EOS/stop ids, max_tokens, max_model_len or a stop string.

        Every check runs after each token, so accepted drafts past a stop are dropped exactly
        where plain decoding would have stopped: the output never depends on the method.
        """
        p = r.params
        stop_ids = r.stop_token_ids
        max_len = self.scheduler.config.max_model_len
        for t in tokens:
            if t in stop_ids:
                return "stop"
            r.token_ids.append(t)
            r.metrics.num_generated_tokens += 1
            hit = bool(p.stop) and self._hit_stop_string(r, 1)
            if hit:
                return "stop"
            if r.num_output_tokens >= p.max_tokens or len(r.token_ids) >= max_len:
                return "length"
        return None

    def _hit_stop_string(self, r: Request, num_new: int) -> bool:
        stops = r.params.stop
        if not stops or self.tokenizer is None:
            return False
        tail = num_new + 4 * max(len(s) for s in stops) + 4
        text = self.tokenizer.decode(r.output_token_ids[-tail:])
        return any(s in text for s in stops)
