"""Agent spec strings: every documented form builds the right agent, and every malformed one
fails with an AgentSpecError that says what was wrong. (``ckpt:`` specs of a real checkpoint:
tests/training/test_training_checkpoint.py.)"""

import subprocess
import sys
from pathlib import Path

import pytest

from lostcities_cfr.agents import (
    DiscardOnlyAgent,
    HeuristicAgent,
    NoisyAgent,
    RandomAgent,
    agent_from_spec,
    agent_kinds,
    describe_agent_specs,
    register_agent_kind,
)
from lostcities_cfr.agents.heuristic import HEURISTIC_PRESETS
from lostcities_cfr.errors import AgentSpecError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ("random", RandomAgent),
        ("discard-only", DiscardOnlyAgent),
        ("heuristic", HeuristicAgent),
        ("heuristic:cautious", HeuristicAgent),
        (" heuristic:aggressive ", HeuristicAgent),
    ],
)
def test_builds_the_named_agent(spec, kind):
    agent = agent_from_spec(spec, seed=0)
    assert isinstance(agent, kind)
    assert agent.name == spec.strip()


def test_heuristic_presets_and_overrides_set_the_parameters():
    assert agent_from_spec("heuristic").params == HEURISTIC_PRESETS["balanced"]
    assert agent_from_spec("heuristic:cautious").params == HEURISTIC_PRESETS["cautious"]
    agent = agent_from_spec("heuristic:cautious:deny_weight=0.1:max_pile_draws=7")
    assert agent.params.deny_weight == 0.1
    assert agent.params.max_pile_draws == 7
    assert agent.params.open_margin == HEURISTIC_PRESETS["cautious"].open_margin


def test_noisy_option_wraps_any_agent():
    agent = agent_from_spec("heuristic:balanced:noisy=0.15", seed=0)
    assert isinstance(agent, NoisyAgent)
    assert agent.epsilon == 0.15
    assert isinstance(agent.agent, HeuristicAgent)
    assert agent.name == "heuristic:balanced:noisy=0.15"
    assert isinstance(agent_from_spec("random:noisy=0").agent, RandomAgent)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "unknown kind ''"),
        ("minimax", "unknown kind 'minimax'; expected one of: random, discard-only, heuristic"),
        ("heuristic:bold", "unknown heuristic preset 'bold'; expected one of: balanced"),
        ("heuristic:balanced:extra", "unexpected argument"),
        ("heuristic:courage=2", "unknown heuristic parameter 'courage'"),
        ("heuristic:max_pile_draws=1.5", "max_pile_draws='1.5' is not an int"),
        ("heuristic:deny_weight=-1", "deny_weight=-1.0 must be >= 0"),
        ("random:3", "unexpected argument"),
        ("random:seed=3", "unknown option"),
        ("heuristic:noisy=lots", "noisy='lots' is not a number"),
        ("heuristic:noisy=1.5", "noisy=1.5 must lie in"),
        ("ckpt", "needs a path"),
        ("ckpt:/no/such/file.ckpt", "no checkpoint file at '/no/such/file.ckpt'"),
        ("py:math", "needs a module and a name"),
        ("py:no_such_module_xyz:make", "cannot import make from no_such_module_xyz"),
        ("py:math:pi", "math.pi is not callable"),
        ("py:builtins:dict", "builtins.dict() returned {}, which has no act()"),
    ],
)
def test_bad_specs_fail_with_a_clear_error(spec, message):
    with pytest.raises(AgentSpecError, match="agent spec") as error:
        agent_from_spec(spec)
    assert message in str(error.value)


def test_registered_kinds_build_agents_and_appear_in_the_help(monkeypatch):
    monkeypatch.setattr("lostcities_cfr.agents.specs._KINDS", dict(agent_kinds()))
    register_agent_kind(
        "always-deck", lambda args, options, seed: DiscardOnlyAgent(seed), "always-deck", "test"
    )
    assert isinstance(agent_from_spec("always-deck"), DiscardOnlyAgent)
    assert "always-deck" in describe_agent_specs()
    with pytest.raises(ValueError, match="lowercase"):
        register_agent_kind("Bad Name", lambda *a: None, "x", "y")


def test_python_specs_build_agents_written_outside_the_package():
    agent = agent_from_spec("py:lostcities_cfr.agents:RandomAgent", seed=0)
    assert isinstance(agent, RandomAgent)


def test_docs_describe_every_kind_and_preset():
    text = DOCS.read_text()
    for name in agent_kinds():
        assert f"`{name}" in text
    for preset in HEURISTIC_PRESETS:
        assert f"heuristic:{preset}" in text


def test_importing_the_agent_layer_does_not_import_training():
    code = (
        "import sys, lostcities_cfr.agents; "
        "print(sorted(m for m in sys.modules if m.startswith('lostcities_cfr.training')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_checkpoint_specs_work_before_the_training_layer_is_imported(tmp_path):
    """The top-level package's stand-in imports training on the first ``ckpt:`` spec."""
    missing = str(tmp_path / "none.ckpt")
    code = f"""
import sys
from lostcities_cfr.agents import agent_from_spec
assert "lostcities_cfr.training" not in sys.modules
try:
    agent_from_spec({"ckpt:" + missing!r})
except Exception as error:
    print(type(error).__name__, error)
print("lostcities_cfr.training.checkpoint" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        f"AgentSpecError agent spec 'ckpt:{missing}': no checkpoint file at {missing!r}",
        "True",
    ]
