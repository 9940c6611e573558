"""An agent written outside the package, named by the ``py:MODULE:NAME`` spec."""

import json

import torch
from my_extensions import LowestActionAgent

from lostcities_cfr import agent_from_spec, evaluate
from lostcities_cfr.commands.evaluate import main as evaluate_main
from lostcities_cfr.game import GameBatch, Rules

SPEC = "py:my_extensions:LowestActionAgent"


def test_the_spec_builds_the_users_agent_which_plays_legal_actions():
    agent = agent_from_spec(SPEC)
    assert isinstance(agent, LowestActionAgent) and agent.name == SPEC
    games = GameBatch.new(Rules.tiny(), 6, seed=0)
    while not bool(games.done.all()):
        actions = agent.act(games)
        live = ~games.done
        assert games.legal_mask()[live].gather(1, actions[live, None]).all()
        games.step(actions)


def test_it_plays_a_whole_evaluation_in_the_arena():
    result = evaluate(agent_from_spec(SPEC), agent_from_spec("random"), games=20, seed=1)
    assert result.games == 20


def test_the_evaluate_command_takes_the_spec(capsys):
    threads = torch.get_num_threads()
    evaluate_main(["--agent", SPEC, "--opponent", "discard-only", "--games", "4", "--json"])
    torch.set_num_threads(threads)
    assert json.loads(capsys.readouterr().out)["agent"] == SPEC
