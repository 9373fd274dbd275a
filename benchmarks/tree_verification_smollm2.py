"""τ of DSpark on SmolLM2-135M with its shipped drafter: chain vs xpress_topc trees, side by side
(greedy, batch 4; τ and tokens per step do not depend on timing).

    python3 benchmarks/tree_verification_smollm2.py [MAX_TOKENS] [--model DIR] [--json out.json]
"""
import json, os, sys, time
import torch
from specpath_engine.llm import LLM, SamplingParams
torch.set_num_threads(1)
MODEL = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else "smollm2-135m"
PROMPTS = [
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "import json\nimport os\n\ndef load_config(path):\n",
    "The capital of France is Paris. The capital of Germany is",
    "Here is a list of fruits:\n1. Apple\n2. Banana\n3.",
]
params = SamplingParams(temperature=0.0, max_tokens=int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 64, ignore_eos=True)
print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
plain = [o.token_ids for o in LLM(MODEL, None, num_threads=1, max_num_seqs=4).generate(PROMPTS, params)]
rows = []
for name, cfg, trees in [("k4 chain", {}, False), ("k4 c2", {"xpress_topc": 2}, True), ("k4 c3", {"xpress_topc": 3}, True),
                         ("k8 chain", {"num_speculative_tokens": 8}, False), ("k8 c2", {"num_speculative_tokens": 8, "xpress_topc": 2}, True),
                         ("k8 c3", {"num_speculative_tokens": 8, "xpress_topc": 3}, True)]:
    llm = LLM(MODEL, {"method": "dspark", "num_speculative_tokens": 4, **cfg}, num_threads=1, max_num_seqs=4, tree_verification=trees)
    t = time.perf_counter()
    outs = llm.generate(PROMPTS, params)
    m = llm.metrics
    per_prompt = [round(o.metrics.num_generated_tokens / max(o.metrics.num_steps, 1), 3) for o in outs]
    row = dict(name=name, tau=m.mean_acceptance_length, tokens_per_step=m.num_generated_tokens / max(m.num_steps, 1),
               per_prompt_tokens_per_step=per_prompt, identical=[o.token_ids for o in outs] == plain, wall_s=time.perf_counter() - t)
    rows.append(row)
    print(json.dumps(row), flush=True)
if "--json" in sys.argv:
    with open(sys.argv[sys.argv.index("--json") + 1], "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1)
