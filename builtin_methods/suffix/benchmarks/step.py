"""Cost of one engine step of suffix decoding: update + speculate for a whole batch.

Workload (issue #17): 64 live requests, each with a 4,096-token history of real text (bytes
of this Python's standard-library sources, one file region per request), plus a global tree
holding earlier responses (other stdlib regions). Every step asks ``SuffixSpeculator.propose``
for drafts for all 64 requests; each request then "accepts" the prefix of its draft that the
file really continues with, plus one token (as greedy verification would), so histories grow
the way they do under speculation. Only ``propose`` is timed: it includes the Python work of
reading the new tokens of every request, the compiled tree update, the global-tree match
update and drafting.

    python3 builtin_methods/suffix/benchmarks/step.py [--requests 64] [--length 4096] [--steps 300]

Prints per-step microseconds (median, p90, mean) of wall time and of this process's CPU time
(``time.process_time``: on a shared machine the wall time also counts waiting for a core), the prefill ingest cost per token, the
acceptance these drafts would get, and the trees' node count. With ``--arctic DIR`` (a folder
holding an importable ``arctic_inference.suffix_decoding`` with its compiled ``_C``), Arctic
Inference's ``SuffixDecodingCache`` runs the same steps in the same process for comparison:
its per-step cost (the Python loop over requests that vLLM's proposer runs: add the new
tokens, speculate) and its acceptance. Arctic adds an active request's output to the global
tree as it is generated; specpath adds it when the request ends. Waits up to a minute for the
shared machine to be quiet (1-minute load average below the core count) and says how loaded
it was.
"""

from __future__ import annotations

import argparse
import os
import sysconfig
import time
from pathlib import Path

import numpy as np


def stdlib_bytes(limit: int) -> np.ndarray:
    """Concatenated bytes of stdlib ``.py`` files (sorted, so every run reads the same)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for path in sorted(root.glob("*.py")):
        data = path.read_bytes()
        chunks.append(np.frombuffer(data, np.uint8))
        total += len(data)
        if total >= limit:
            break
    return np.concatenate(chunks).astype(np.int32)


def wait_for_quiet(max_wait: float = 60.0) -> str:
    cores = os.cpu_count() or 1
    start = time.time()
    while os.getloadavg()[0] >= cores and time.time() - start < max_wait:
        time.sleep(5)
    load = os.getloadavg()
    state = "quiet" if load[0] < cores else "BUSY (results are noisy)"
    return f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {cores} cores: {state}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--cached", type=int, default=256, help="earlier responses in the global tree")
    parser.add_argument("--k", type=int, nargs="*", default=[24, 8])
    parser.add_argument("--arctic", default=None, help="folder with an importable arctic_inference (built _C)")
    args = parser.parse_args()

    import torch

    from specpath.config.speculative import SpeculativeConfig
    from specpath.speculator import DraftBatch, DraftRequest, SpeculatorContext
    from specpath_suffix.speculator import SuffixSpeculator

    torch.set_num_threads(1)
    region = args.length + 4 * args.steps
    text = stdlib_bytes((args.requests + args.cached) * region + region)
    print(wait_for_quiet())
    for k in args.k:
        spec = SpeculativeConfig.from_dict({"method": "suffix", "num_speculative_tokens": k})
        context = SpeculatorContext(vocab_size=256, max_model_len=1 << 20, max_num_seqs=args.requests)
        speculator = SuffixSpeculator(spec, context)
        cache = speculator.cache
        # Earlier responses: other regions of the stdlib, finished before these requests came.
        for i in range(args.cached):
            start = (args.requests + i) * region
            cache.append(f"old-{i}", [0])
            cache.draft(f"old-{i}", 1)
            cache.append(f"old-{i}", text[start:start + 1024].tolist())
            cache.stop(f"old-{i}")
        truth = [text[i * region:(i + 1) * region].tolist() for i in range(args.requests)]
        histories = [t[: args.length] for t in truth]

        def batch() -> DraftBatch:
            return DraftBatch(requests=tuple(
                DraftRequest(req_id=str(i), token_ids=h, num_new_positions=1, max_draft_tokens=k)
                for i, h in enumerate(histories)
            ))

        start = time.perf_counter()
        proposal = speculator.propose(batch())
        prefill = time.perf_counter() - start
        times, cpu, drafted, accepted = [], [], 0, 0
        for _ in range(args.steps):
            flat = proposal.token_ids.tolist()
            offset = 0
            for i, n in enumerate(proposal.num_draft_tokens):
                draft = flat[offset:offset + n]
                offset += n
                have = len(histories[i])
                good = 0
                while good < n and have + good < len(truth[i]) and draft[good] == truth[i][have + good]:
                    good += 1
                drafted += n
                accepted += good
                histories[i] = truth[i][: have + good + 1]
            b = batch()
            start, start_cpu = time.perf_counter(), time.process_time()
            proposal = speculator.propose(b)
            cpu.append(time.process_time() - start_cpu)
            times.append(time.perf_counter() - start)
        us = np.array(times) * 1e6
        cpu_us = np.array(cpu) * 1e6
        nodes = cache.num_nodes
        memory = (cache.nodes.nbytes + cache.free.nbytes + cache.table.nbytes) / 2**20
        print(
            f"K={k:2d} depth 24: {args.requests} requests x {args.length} tokens, {args.cached} cached responses\n"
            f"  update + speculate per engine step: median {np.median(us):7.1f} us, p90 "
            f"{np.percentile(us, 90):7.1f} us, mean {us.mean():7.1f} us "
            f"({np.median(us) / args.requests:.2f} us per request)\n"
            f"  CPU time per engine step: median {np.median(cpu_us):7.1f} us, p90 {np.percentile(cpu_us, 90):7.1f} us, "
            f"mean {cpu_us.mean():7.1f} us\n"
            f"  prefill ingest: {prefill * 1e9 / (args.requests * args.length):.0f} ns per token\n"
            f"  drafts {drafted}, accepted {accepted} ({accepted / max(drafted, 1):.2f}); "
            f"tau {1 + accepted / (args.steps * args.requests):.2f}\n"
            f"  trees: {nodes} nodes for {args.requests * args.length + args.cached * 1024} tokens "
            f"({nodes / (args.requests * args.length + args.cached * 1024):.1f} per token), {memory:.0f} MiB arrays"
        )
        if args.arctic:
            arctic_steps(args, k, text, region)
    print(wait_for_quiet(0))
    return 0


def arctic_steps(args, k: int, text: np.ndarray, region: int) -> None:
    """The same workload through Arctic Inference's SuffixDecodingCache (vLLM's use of it)."""
    import sys

    sys.path.insert(0, args.arctic)
    from arctic_inference.suffix_decoding.cache import SuffixDecodingCache

    cache = SuffixDecodingCache(max_tree_depth=24, max_cached_requests=10000)
    for i in range(args.cached):
        start = (args.requests + i) * region
        cache.start_request(f"old-{i}", [0])
        cache.add_active_response(f"old-{i}", text[start:start + 1024].tolist())
        cache.stop_request(f"old-{i}")
    truth = [text[i * region:(i + 1) * region].tolist() for i in range(args.requests)]
    histories = [t[: args.length] for t in truth]
    start = time.perf_counter()
    for i, h in enumerate(histories):
        cache.start_request(str(i), h)
    prefill = time.perf_counter() - start
    pending = [[] for _ in histories]
    drafts = [[] for _ in histories]
    times, cpu, drafted, accepted = [], [], 0, 0
    for step in range(args.steps + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        for i, h in enumerate(histories):  # vLLM's SuffixDecodingProposer: update, then speculate
            if pending[i]:
                cache.add_active_response(str(i), pending[i])
            pattern = h[-24:]
            drafts[i] = cache.speculate(str(i), pattern, max_spec_tokens=k, max_spec_factor=1.0,
                                        min_token_prob=0.1).token_ids
        if step:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        if step == args.steps:
            break
        for i, draft in enumerate(drafts):
            have = len(histories[i])
            good = 0
            while good < len(draft) and have + good < len(truth[i]) and draft[good] == truth[i][have + good]:
                good += 1
            drafted += len(draft)
            accepted += good
            pending[i] = truth[i][have: have + good + 1]
            histories[i] = truth[i][: have + good + 1]
    us = np.array(times) * 1e6
    print(
        f"  arctic-inference 0.3.0 SuffixDecodingCache, same steps: median {np.median(us):7.1f} us, p90 "
        f"{np.percentile(us, 90):7.1f} us, mean {us.mean():7.1f} us; CPU median {np.median(cpu) * 1e6:7.1f} us; prefill "
        f"{prefill * 1e9 / (args.requests * args.length):.0f} ns per token\n"
        f"  arctic drafts {drafted}, accepted {accepted} ({accepted / max(drafted, 1):.2f}); "
        f"tau {1 + accepted / (args.steps * args.requests):.2f}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
