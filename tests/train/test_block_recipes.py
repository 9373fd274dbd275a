"""The DFlash and DSpark recipes end to end on the embedded byte model (a few seconds of
training): a ``--train-vocab`` run records its ids in the exported checkpoint, and serving that
checkpoint drafts through the restricted head with greedy output unchanged."""

import json

import pytest
import torch

from specpath_engine.modeling.named_models import embedded_model_path as embedded_target_path
from specpath_drafting.vocab import RestrictedLMHead, checkpoint_train_vocab

TINY_RUN = ["--minutes", "0.01", "--window", "32", "--corpus-windows", "6", "--generated-windows", "0",
            "--heldout-windows", "2", "--batch", "2", "--anchors", "2", "--k", "3", "--threads", "1",
            "--eval-every", "1000", "--warmup", "1", "--train-vocab", "40"]


@pytest.mark.parametrize(("method", "extra"), [("dflash", []), ("dspark", ["--soft-ce", "--markov-rank", "4"])])
def test_a_train_vocab_run_is_served_over_its_recorded_ids(tmp_path, method, extra):
    from specpath_engine.llm import LLM
    from specpath_engine.request import SamplingParams

    main = {"dflash": "specpath_train.recipes.dflash", "dspark": "specpath_train.recipes.dspark"}[method]
    module = __import__(main, fromlist=["main"])
    threads = torch.get_num_threads()
    try:
        assert module.main(["--out", str(tmp_path / "run"), "--export", str(tmp_path / "export"), *TINY_RUN, *extra]) == 0
    finally:
        torch.set_num_threads(threads)
    record = json.loads((tmp_path / "export" / "config.json").read_text())["specpath_training"]
    assert record["script"] == main and len(record["train_vocab_ids"]) == 40
    assert checkpoint_train_vocab(tmp_path / "export", 256).tolist() == sorted(record["train_vocab_ids"])

    params = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)
    prompts = ["def main():\n    ", "import os\n"]
    plain = [o.token_ids for o in LLM(str(embedded_target_path()), num_threads=1).generate(prompts, params)]
    llm = LLM(str(embedded_target_path()), {"method": method, "model": str(tmp_path / "export"),
                                            "num_speculative_tokens": 3}, num_threads=1)
    assert [o.token_ids for o in llm.generate(prompts, params)] == plain
    assert isinstance(llm.engine.runner.speculator.drafter._lm_head, RestrictedLMHead)
