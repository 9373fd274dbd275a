"""Thread count and OpenMP wait-policy selection (specpath_engine.threads)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from specpath_engine import threads
from specpath_engine.threads import choose_threads, parse_threads, prefer_passive_wait


@given(cpus=st.integers(1, 512), load=st.floats(0, 1000, allow_nan=False))
def test_load_leaves_at_least_one_and_at_most_every_cpu(cpus, load):
    n = choose_threads(cpus=cpus, load=load, passive=False).num_threads
    assert 1 <= n <= cpus
    assert n == cpus or load > 0.5  # a quiet machine gets every CPU


def test_sleeping_threads_use_every_cpu_whatever_the_load():
    choice = choose_threads(cpus=2, load=14.0, passive=True)
    assert (choice.num_threads, choice.reason) == (2, "2 CPUs, idle threads sleep")
    assert choose_threads(cpus=2, load=14.0, passive=True, small_model=True).num_threads == 1


def test_spinning_threads_give_way_to_the_load():
    assert choose_threads(cpus=2, load=0.2).num_threads == 2
    assert choose_threads(cpus=2, load=1.2).num_threads == 1
    assert choose_threads(cpus=2, load=5.0).num_threads == 1
    assert choose_threads(cpus=16, load=4.0).num_threads == 12
    assert choose_threads(cpus=16, load=4.0).reason == "load 4.0 on 16 CPUs"
    assert choose_threads(cpus=4, load=None).num_threads == 4
    assert choose_threads(cpus=4, load=float("nan")).num_threads == 4


def test_overrides_in_order():
    assert choose_threads(requested=1, env="2", cpus=4, load=9.0, small_model=False).num_threads == 1
    env = choose_threads(env=" 1 ", cpus=4, load=9.0, small_model=False)
    assert (env.num_threads, env.reason) == (1, "SPECPATH_NUM_THREADS")
    assert choose_threads(env="", cpus=4, load=0.0, small_model=True) == threads.ThreadChoice(
        num_threads=1, reason="small model", fixed=True)


@pytest.mark.parametrize("bad", [0, -1, 10**6, 10**400, "1000000", "9" * 5000, "x", "1.5", "", "٣", True, 2.0, None])
def test_bad_thread_counts_are_one_line_errors(bad):
    from specpath_engine.arguments import EngineArgumentError

    with pytest.raises(EngineArgumentError) as info:
        parse_threads(bad, source="SPECPATH_NUM_THREADS")
    text = str(info.value)
    assert text.startswith("SPECPATH_NUM_THREADS: ") and "\n" not in text and len(text) < 160


@given(st.text(max_size=30))
def test_any_env_text_parses_or_refuses_in_one_line(text):
    try:
        n = parse_threads(text, source="SPECPATH_NUM_THREADS")
    except ValueError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("SPECPATH_NUM_THREADS: ")
    else:
        assert 1 <= n <= 4 * threads.available_cpus() and n == int(text.strip())


def test_wait_policy_short_spin_unless_user_set_or_too_late():
    env: dict = {}
    assert prefer_passive_wait(env, torch_loaded=False) == "spin 1000 times, then sleep"
    assert env == {"GOMP_SPINCOUNT": threads.SHORT_SPIN}
    user = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert prefer_passive_wait(user, torch_loaded=False) == "active"
    assert user == {"OMP_WAIT_POLICY": "ACTIVE"}
    spins = {"GOMP_SPINCOUNT": "300000"}
    assert prefer_passive_wait(spins, torch_loaded=False) == "spin 300000 times, then sleep"
    assert spins == {"GOMP_SPINCOUNT": "300000"}
    late: dict = {}
    assert prefer_passive_wait(late, torch_loaded=True).startswith("libgomp's default")
    assert late == {}  # libgomp has read its environment already: nothing to set
    prefer_passive_wait()  # back to what this process really did (torch is loaded here)


def test_omp_num_threads_counts_as_the_users_choice(monkeypatch):
    monkeypatch.delenv("SPECPATH_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads.machine_threads(None) == threads.ThreadChoice(num_threads=1, reason="OMP_NUM_THREADS", fixed=True)
    monkeypatch.setenv("SPECPATH_NUM_THREADS", "1")
    assert threads.machine_threads(None).reason == "SPECPATH_NUM_THREADS"
    monkeypatch.setenv("SPECPATH_NUM_THREADS", "0")
    with pytest.raises(ValueError, match="^SPECPATH_NUM_THREADS: expected an integer in"):
        threads.machine_threads(None)


def test_available_cpus_within_affinity():
    assert 1 <= threads.available_cpus() <= len(os.sched_getaffinity(0))


PROBE = """
import os
import specpath_engine
import torch
from specpath_engine.threads import restore_environment, wait_policy
torch.ones(4).sum()
restore_environment()
print(wait_policy(), os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"))
"""


def _probe(env: dict) -> tuple[str, str]:
    """(stdout, libgomp's own report of its settings: OMP_DISPLAY_ENV)."""
    env = {**env, "OMP_DISPLAY_ENV": "VERBOSE"}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip(), out.stderr


def test_import_sets_a_short_spin_before_torch_and_leaves_children_the_users_environment():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    said, gomp = _probe(env)
    assert said == "spin 1000 times, then sleep (specpath default) None None"  # restored for child processes
    assert "GOMP_SPINCOUNT = '1000'" in gomp  # what libgomp itself read
    said, gomp = _probe({**env, "OMP_WAIT_POLICY": "active"})
    assert said == "active (OMP_WAIT_POLICY) active None" and "OMP_WAIT_POLICY = 'ACTIVE'" in gomp


def test_run_states_the_threads_and_wait_policy(capsys):
    import json

    from specpath.cli import main

    assert main(["run", "--prompt", "def f(x):", "--max-tokens", "2", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)["threads"]
    assert said == {"num_threads": 1, "reason": "small model", "wait_policy": threads.wait_policy(), "adaptive": False}


def test_run_refuses_a_thread_count_past_the_cpus_in_one_line(capsys):
    from specpath.cli import main

    try:
        code = main(["run", "--prompt", "x", "--threads", "1000000"])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1
    assert "num_threads: 1000000 is more than 4 per CPU" in err


def test_llm_refuses_a_bad_thread_count_before_loading():
    from specpath_engine.llm import LLM

    with pytest.raises(ValueError, match="^num_threads: 1000000 is more than 4 per CPU"):
        LLM(num_threads=10**6)
