"""The parts of checkpoint loading around the model: how a ``ckpt:`` spec is read, which
class paths and model classes a file may name, what ``networks_only`` keeps, and the
one-line errors for files that are not checkpoints."""

from __future__ import annotations

import functools
import shutil

import pytest
import torch
from tiny_training import CKPT_SUFFIXES, positions

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.cfr.external_sampling import ExternalSampling
from lostcities_cfr.cfr.networks import PolicyMLP
from lostcities_cfr.errors import AgentSpecError, CheckpointError
from lostcities_cfr.evaluation.arena import describe_rules
from lostcities_cfr.game import Rules
from lostcities_cfr.training import DeepCFR
from lostcities_cfr.training import checkpoint as checkpoint_module
from lostcities_cfr.training.agents import SeatAgent
from lostcities_cfr.training.checkpoint import (
    BEST_AGENT,
    CLASS_PATHS_VARIABLE,
    DEFAULT_MODEL_CLASS,
    allow_class_path,
    allowed_class_paths,
    class_paths,
    hyperparameters,
    load_agent,
    load_model,
    loadable_model_classes,
    networks_only,
    plain_data,
    read_checkpoint,
    register_model_class,
)

BEST_CLASS = "lostcities_cfr.baselines.ppo.PPO"  # the shipped agent's class


@pytest.fixture
def isolated_allow_lists(monkeypatch):
    """Registrations made by a test stay in it."""
    monkeypatch.setattr(checkpoint_module, "_LOADABLE", dict(checkpoint_module._LOADABLE))
    monkeypatch.setattr(checkpoint_module, "_ALLOWED_CLASS_PATHS", set())
    monkeypatch.delenv(CLASS_PATHS_VARIABLE, raising=False)


def seats_greedy(agent) -> list[bool]:
    return [seat.greedy for seat in agent.agents]


@pytest.mark.parametrize(("suffix", "policy", "greedy"), CKPT_SUFFIXES)
def test_flags_are_peeled_off_the_end_of_a_path_that_holds_colons(
    tiny_checkpoint, suffix, policy, greedy
):
    """What each agent plays: test_training_checkpoint.py's saved-networks test."""
    path, _ = tiny_checkpoint
    assert ":" in str(path.parent.name)  # "run:1": the path itself holds a ':'
    agent = agent_from_spec(f"ckpt:{path}{suffix}", seed=3)
    assert isinstance(agent, SeatAgent) == (policy == "current")
    assert agent.rules == Rules.tiny()
    played = seats_greedy(agent) if policy == "current" else [agent.greedy]
    assert set(played) == {greedy}


def test_a_flag_name_inside_the_path_stays_part_of_the_path(tiny_checkpoint, tmp_path):
    path, _ = tiny_checkpoint
    odd = tmp_path / "greedy:current" / "x.ckpt"  # flags as folder names, not at the end
    odd.parent.mkdir()
    shutil.copy(path, odd)
    agent = agent_from_spec(f"ckpt:{odd}")
    assert not isinstance(agent, SeatAgent) and not agent.greedy


@pytest.mark.parametrize(
    ("suffix", "message"),
    [
        (":average:sdcfr", "choose one of :average, :current and :sdcfr, not several$"),
        (":current:average:greedy", "choose one of :average, :current and :sdcfr"),
        (":seats=2", r"unknown option\(s\) seats; usage: ckpt:PATH"),
    ],
)
def test_bad_checkpoint_specs_say_what_is_wrong(tiny_checkpoint, suffix, message):
    path, _ = tiny_checkpoint
    with pytest.raises(AgentSpecError, match=message):
        agent_from_spec(f"ckpt:{path}{suffix}")


def test_a_spec_of_flags_only_needs_a_path():
    with pytest.raises(AgentSpecError, match="a checkpoint spec needs a path; usage: ckpt:PATH"):
        agent_from_spec("ckpt::current:greedy")
    # a lone word is a path (a file may be called "greedy")
    with pytest.raises(AgentSpecError, match="no checkpoint file at 'greedy'"):
        agent_from_spec("ckpt:greedy")


def test_a_policy_the_model_does_not_play_is_refused_naming_what_it_plays(tiny_checkpoint):
    path, _ = tiny_checkpoint
    with pytest.raises(AgentSpecError) as error:
        load_agent(path, policy="policy")
    assert str(error.value) == (
        f"checkpoint {path}: a DeepCFR plays ['average', 'current'], not 'policy'"
    )


def test_load_agent_passes_the_seed_to_sampling(tiny_checkpoint):
    path, _ = tiny_checkpoint
    batch = positions(Rules.tiny(), per_depth=64)
    same = [load_agent(path, seed=5).act(batch) for _ in range(2)]
    assert torch.equal(*same)
    assert not torch.equal(same[0], load_agent(path, seed=6).act(batch))


def test_networks_only_keeps_the_class_arguments_weights_and_iteration(tiny_checkpoint, tmp_path):
    path, saved = tiny_checkpoint
    checkpoint = torch.load(path, weights_only=True)
    small = networks_only(checkpoint)
    assert set(small) == {"model_class", "hyper_parameters", "state_dict", "iteration"}
    # Saved after fit's one iteration had ended: its epoch counts it (an iteration-end
    # checkpoint holds the 0-based epoch); the loop state says which.
    assert small["iteration"] == checkpoint["epoch"] == 1
    assert small["model_class"] == DEFAULT_MODEL_CLASS
    assert small["hyper_parameters"] == checkpoint["hyper_parameters"]
    torch.save(small, tmp_path / "small.pt")
    loaded = load_model(tmp_path / "small.pt")
    for name, tensor in saved.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    # a checkpoint older than the class key, and one saved before any epoch
    bare = {"state_dict": checkpoint["state_dict"]}
    assert networks_only(bare) == {
        "model_class": DEFAULT_MODEL_CLASS,
        "hyper_parameters": {},
        "state_dict": checkpoint["state_dict"],
        "iteration": 0,
    }
    # a PPO checkpoint (or any other registered class) keeps its own class
    assert networks_only({**bare, "model_class": BEST_CLASS})["model_class"] == BEST_CLASS


def test_weights_of_another_shape_give_one_line_naming_the_file_the_rules_and_the_weight(
    tiny_checkpoint, tmp_path
):
    path, saved = tiny_checkpoint
    checkpoint = torch.load(path, weights_only=True)
    bias = checkpoint["state_dict"]["strategy_net.head.bias"]
    checkpoint["state_dict"]["strategy_net.head.bias"] = torch.cat([bias, bias[:1]])
    torch.save(checkpoint, tmp_path / "wider.ckpt")
    with pytest.raises(CheckpointError) as refused:
        load_model(tmp_path / "wider.ckpt")
    message = str(refused.value)
    assert message.startswith(
        f"checkpoint {tmp_path / 'wider.ckpt'}: its weights do not fit the DeepCFR of "
        f"{describe_rules(saved.rules)} (size mismatch for strategy_net.head.bias"
    )
    assert "\n" not in message and message.endswith(")")


def test_load_agent_refuses_a_checkpoint_of_other_rules_than_those_it_is_asked_for():
    with pytest.raises(CheckpointError, match=f"checkpoint {BEST_AGENT}.*expected"):
        load_agent(BEST_AGENT, rules=Rules.tiny())
    assert load_agent(BEST_AGENT, rules=Rules.classic()).rules == Rules.classic()


def test_class_paths_outside_the_package_load_only_when_allowed(
    tiny_checkpoint, isolated_allow_lists, monkeypatch
):
    path, _ = tiny_checkpoint
    checkpoint = torch.load(path, weights_only=True)
    outside = "my_lab.samplers.Fancy"
    checkpoint["hyper_parameters"]["sampler"] = {"class_path": outside, "init_args": {}}
    checkpoint["hyper_parameters"]["_instantiator"] = "lightning.cli.instantiate"
    with pytest.raises(CheckpointError, match=rf"allow_class_path\('{outside}'\)"):
        hyperparameters(checkpoint, path)
    kept = hyperparameters(checkpoint, path, allowed=[outside])
    assert "_instantiator" not in kept and kept["sampler"]["class_path"] == outside
    monkeypatch.setenv(CLASS_PATHS_VARIABLE, f" other.Thing , {outside},,")
    assert allowed_class_paths() == {"other.Thing", outside}
    hyperparameters(checkpoint, path)
    monkeypatch.delenv(CLASS_PATHS_VARIABLE)
    allow_class_path(ExternalSampling)
    allow_class_path(outside)
    assert allowed_class_paths() == {
        "lostcities_cfr.cfr.external_sampling.ExternalSampling",
        outside,
    }
    hyperparameters(checkpoint, path)


def test_load_model_names_the_file_when_it_refuses_a_class(tiny_checkpoint, tmp_path):
    path, _ = tiny_checkpoint
    checkpoint = torch.load(path, weights_only=True)
    foreign = {**checkpoint, "model_class": "my_lab.models.Mine"}
    torch.save(foreign, tmp_path / "foreign.ckpt")
    with pytest.raises(CheckpointError) as refused:
        load_model(tmp_path / "foreign.ckpt")
    assert str(refused.value).startswith(f"checkpoint {tmp_path / 'foreign.ckpt'}: model_class=")
    sampler = {"class_path": "my_lab.samplers.Fancy", "init_args": {}}
    outside = {
        **checkpoint,
        "hyper_parameters": {**checkpoint["hyper_parameters"], "sampler": sampler},
    }
    torch.save(outside, tmp_path / "outside.ckpt")
    with pytest.raises(CheckpointError) as refused:
        load_model(tmp_path / "outside.ckpt")
    assert str(refused.value).startswith(f"checkpoint {tmp_path / 'outside.ckpt'}: class_path=")


def test_torch_class_paths_are_safe_and_a_non_string_class_path_is_refused(tiny_checkpoint):
    path, _ = tiny_checkpoint
    hparams = {"network": {"class_path": "torch.nn.Linear"}, "x": [{"class_path": 3}]}
    with pytest.raises(CheckpointError, match=r"class_path=3 in its hyperparameters"):
        hyperparameters({"hyper_parameters": hparams}, path)
    del hparams["x"]
    assert hyperparameters({"hyper_parameters": hparams}, path) == hparams


def test_class_paths_are_found_at_any_depth():
    data = {
        "class_path": "a.A",
        "init_args": {"inner": {"class_path": "b.B"}, "many": [{"class_path": "c.C"}, 1]},
        "other": [[{"class_path": "d.D"}]],
    }
    assert sorted(class_paths(data)) == ["a.A", "b.B", "c.C", "d.D"]
    assert class_paths("class_path") == [] and class_paths(None) == []


def test_registering_a_class_path_keeps_an_imported_class(isolated_allow_lists):
    register_model_class(DeepCFR)
    register_model_class(DEFAULT_MODEL_CLASS)  # the path of a class already imported
    assert checkpoint_module._LOADABLE[DEFAULT_MODEL_CLASS] is DeepCFR
    register_model_class("my_lab.models.Mine")
    assert loadable_model_classes() == sorted(
        [
            DEFAULT_MODEL_CLASS,
            "lostcities_cfr.baselines.ppo.PPO",
            "lostcities_cfr.baselines.expert_iteration.ExpertIteration",
            "my_lab.models.Mine",
        ]
    )


def test_plain_data_keeps_classes_and_partials_by_class_path():
    assert plain_data(PolicyMLP) == {"class_path": "lostcities_cfr.cfr.networks.PolicyMLP"}
    partial = functools.partial(PolicyMLP, width=8)
    assert plain_data(partial) == {
        "class_path": "lostcities_cfr.cfr.networks.PolicyMLP",
        "init_args": {"width": 8},
    }
    assert plain_data((1, (2.5, "x"))) == [1, [2.5, "x"]]


class Forgetful:
    """Keeps no attribute for its constructor argument."""

    def __init__(self, depth: int) -> None:
        self.levels = depth


def test_plain_data_refuses_an_object_it_could_not_rebuild():
    with pytest.raises(CheckpointError, match=r"Forgetful cannot be saved .* attribute 'depth'"):
        plain_data(Forgetful(3))


def test_files_that_are_no_checkpoint_give_one_error_naming_them(tmp_path):
    missing = tmp_path / "none.ckpt"
    with pytest.raises(CheckpointError, match=rf"^checkpoint {missing}: no such file$"):
        read_checkpoint(missing)
    link = tmp_path / "last.ckpt"
    link.symlink_to(missing)
    with pytest.raises(CheckpointError, match=r"no such file \(a link to a missing file\)$"):
        read_checkpoint(link)
    for name, content in [("list.ckpt", [1, 2]), ("dict.ckpt", {"state_dict": [1]})]:
        torch.save(content, tmp_path / name)
        with pytest.raises(CheckpointError, match="holds no state_dict; expected a checkpoint"):
            read_checkpoint(tmp_path / name)


def test_a_big_checkpoint_can_be_mapped_instead_of_read(tiny_checkpoint):
    path, _ = tiny_checkpoint
    mapped, read = read_checkpoint(path, mmap=True), read_checkpoint(path)
    for name, tensor in read["state_dict"].items():
        assert torch.equal(mapped["state_dict"][name], tensor)
