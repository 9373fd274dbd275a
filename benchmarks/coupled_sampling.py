"""Seeded sampling: acceptance of coupled drafts against the alternatives, and what the noise costs.

Part 1 (τ): every installed drafting method on the embedded model (``specpath demo``'s configs),
16 prompts, temperature ``--temperature``, one seed per request, ``--max-tokens`` tokens each, in
one batch, ``--seed-sets`` times with other seeds. τ is ``mean_acceptance_length`` (tokens per verification step with drafts). ``--drafts``
picks what the drafters of seeded requests do:

* ``coupled`` (default): race on the request's sampling noise (``argmax q / E``), the engine's rule;
* ``greedy``: the noise is withheld from the drafters, which draft their argmax (the config's default
  ``draft_sample_method``);
* ``independent``: the noise is withheld and the drafters sample (``draft_sample_method="random"``)
  from their own generator, independently of the verifier's noise.

On a tree without seeded coupling (before it existed) ``coupled`` runs the defaults and
``independent`` the random drafts, so the same command measures the old rejection sampling.

Part 2 (``--noise-cost``): microseconds per position of the seeded noise for a ``--vocab``-sized
vocabulary (counter-based uniforms, ``-log(-log u)``; and as it was, from a fresh torch generator), next to a ``torch.multinomial`` draw
from a probability vector of the same size (plain sampling's old cost), and one seeded request's
verification of K=4 drafts before (bonus draw + ``rejection_sample``) and after (the noise at all
K+1 positions, none cached, + the race), measured side by side, ``--threads`` torch threads (1).

    python benchmarks/coupled_sampling.py [--drafts coupled|greedy|independent] [--noise-cost]
"""

from __future__ import annotations

import argparse
import json
import os
import time

PROMPTS = [
    "def main(argv=None):\n    ",
    "import os\nimport sys\n\n",
    "class Queue:\n    def put(self, item):\n",
    "    def __repr__(self):\n        return ",
    "for i in range(10):\n    ",
    "def parse(text):\n    \"\"\"Parse ",
    "    if not isinstance(value, int):\n        raise ",
    "with open(path) as f:\n    ",
    "class Error(Exception):\n    ",
    "    return self._cache.get(",
    "import re\n\nPATTERN = re.compile(",
    "    for key, value in items:\n        ",
    "def __init__(self, name, value):\n        self.",
    "try:\n    import ",
    "    @property\n    def ",
    "if __name__ == '__main__':\n    ",
]


def acceptance(args) -> dict[str, float]:
    from specpath import plugins
    from specpath_engine import runner
    from specpath_engine.cli_run import demo_configs
    from specpath_engine.llm import LLM, SamplingParams

    coupled_engine = hasattr(runner.ModelRunner, "_coupled")
    if args.drafts != "coupled" and coupled_engine:
        import attrs

        original = runner.ModelRunner._draft_request

        def withheld(self, r, budget):
            return attrs.evolve(original(self, r, budget), noise=None)

        runner.ModelRunner._draft_request = withheld
    plugins.reset()
    out = {}
    only = None if args.methods is None else set(args.methods.split(","))
    for name, config in demo_configs(args.k, only)[0]:
        if args.drafts == "independent":
            config = {**config, "draft_sample_method": "random"}
        try:
            llm = LLM(None, config, max_num_seqs=len(PROMPTS), num_threads=1)
        except ValueError as e:  # a method without random drafts
            print(f"{name:12s} skipped: {e}")
            continue
        steps = accepted = drafted = 0
        for s in range(args.first_seed_set, args.first_seed_set + args.seed_sets):
            params = [SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens, seed=1000 * (s + 1) + i,
                                     ignore_eos=True) for i in range(len(PROMPTS))]
            llm.generate(PROMPTS, params)
            m = llm.metrics
            steps, accepted, drafted = steps + m.num_drafts, accepted + m.num_accepted_tokens, drafted + m.num_draft_tokens
        out[name] = 1 + accepted / max(steps, 1)
        print(f"{name:12s} tau {out[name]:.3f}  accepted/drafted {accepted / max(drafted, 1):.3f}  "
              f"steps with drafts {steps}", flush=True)
    return out


def noise_cost(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    from specpath_engine.sample import rejection_sample
    from specpath_engine.sample.randomness import position_generator
    from specpath_engine.sampling import sample_tokens

    v, k = args.vocab, 4
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(k + 1, v, generator=gen) * 3  # one request's draft rows and bonus row
    drafts = logits[:k].argmax(-1).to(torch.int32)
    temperature = torch.tensor([0.8])
    probs = torch.softmax(logits[0] / 0.8, -1)

    def multinomial(i: int) -> None:
        torch.multinomial(probs, 1, generator=position_generator(7, i))

    def old_step(i: int) -> None:  # the bonus draw, then rejection sampling of K one-hot drafts
        g = [position_generator(7, i)]
        bonus = sample_tokens(logits[k:], temperature, None, None, g, [0])
        rejection_sample(drafts, [k], logits[:k], bonus.to(torch.int32), temperature, generators=g)

    cases = {"multinomial draw (old plain sampling)": (multinomial, 1)}
    try:
        from specpath_engine.sample.noise import SeededNoise, gumbel_noise, stream_key, uniforms
        from specpath_engine.sample.race import verify_chains

        def noise(i: int) -> None:
            gumbel_noise(7, i, v)

        gumbel = gumbel_noise(7, 0, v)

        def race(i: int) -> None:
            (logits[0] / 0.8 + gumbel).argmax()

        def new_step(i: int) -> None:  # every position's noise generated here (no drafter before it)
            verify_chains([drafts.tolist()], logits, [0.8], None, None, SeededNoise(7, v).gumbel(i, k + 1))

        def noise_torch_generator(i: int) -> None:  # the noise's uniforms as they were made before uniforms.c
            u = torch.rand(v, generator=position_generator(7, i))
            u.neg_().log1p_().neg_().clamp_min_(2.0**-25).log_().neg_()

        def noise_torch_log(i: int) -> None:  # the uniforms as now, the logs torch's (before uniforms.c's Gumbel)
            u = uniforms(stream_key(7, i), v)
            u.neg_().log1p_().neg_().clamp_min_(2.0**-25).log_().neg_()

        cases["seeded noise, one position, torch's generator (before)"] = (noise_torch_generator, 1)
        cases["seeded noise, one position, torch's logs (before)"] = (noise_torch_log, 1)
        cases["seeded noise, one position"] = (noise, 1)
        cases["race argmax given the noise"] = (race, 1)
        cases[f"old step: bonus draw + rejection_sample, K={k}"] = (old_step, k + 1)
        cases[f"new step: noise at K+1 positions + race, K={k}"] = (new_step, k + 1)
    except ImportError:
        cases[f"old step: bonus draw + rejection_sample, K={k}"] = (old_step, k + 1)
    n = args.positions
    best = {name: float("inf") for name in cases}
    for _ in range(args.repeats):  # interleaved: the machine's load hits every case alike
        for name, (f, _) in cases.items():
            f(0)
            t0 = time.perf_counter()
            for i in range(n):
                f(i)
            best[name] = min(best[name], (time.perf_counter() - t0) / n * 1e6)
    base = best["multinomial draw (old plain sampling)"]
    for name, us in best.items():
        per = cases[name][1]
        print(f"{name:48s} {us:8.1f} us/call  {us / per:7.1f} us/position  ({us / base:.2f}x a multinomial draw)  V={v}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drafts", default="coupled", choices=["coupled", "greedy", "independent"])
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--methods", default=None, help="comma-separated; default: every installed drafting method")
    ap.add_argument("--seed-sets", type=int, default=1, help="runs of the 16 prompts, each with other seeds")
    ap.add_argument("--first-seed-set", type=int, default=0, help="set s seeds request i with 1000 * (s + 1) + i")
    ap.add_argument("--noise-cost", action="store_true")
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--positions", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="--noise-cost: torch's (and the native kernels') threads")
    ap.add_argument("--json", default=None, help="write the τ table here")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}")
    if args.noise_cost:
        noise_cost(args)
        return 0
    taus = acceptance(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"drafts": args.drafts, "temperature": args.temperature, "tau": taus}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
