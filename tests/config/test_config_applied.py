"""What ``specpath explain`` says about the draft-side overrides when only the core is installed:
the policy an engine follows for a value it cannot apply (refused or ignored)."""

import json

from specpath import create_speculative_config
from specpath.cli import main
from specpath.config import applied


def test_without_an_engine_explain_shows_the_policy(monkeypatch, capsys):
    monkeypatch.setattr(applied, "engines", lambda: {})
    spec = create_speculative_config({"method": "ngram", "num_speculative_tokens": 2, "moe_backend": "triton"})
    rows = applied.describe_overrides(spec)
    assert list(rows) == [applied.NO_ENGINE]
    got = {r["field"]: (r["requested"], r["outcome"]) for r in rows[applied.NO_ENGINE]}
    assert got == {"attention_backend": (None, "refused"), "kv_cache_dtype": (None, "refused"),
                   "moe_backend": ("triton", "ignored")}
    config = json.dumps({"method": "ngram", "num_speculative_tokens": 2})
    assert main(["explain", "--speculative-config", config]) == 0
    assert "overrides:      no engine installed; one that cannot apply a value does this" in capsys.readouterr().out


def test_an_engine_that_fails_to_load_is_left_out(monkeypatch):
    class Broken:
        name = "broken"

        def load(self):
            raise ImportError("no such module")

    monkeypatch.setattr(applied.metadata, "entry_points", lambda group: [Broken()])
    assert applied.engines() == {}
