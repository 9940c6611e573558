"""A network written outside the package, named in a config by its class path."""

import functools
import re

import pytest
import torch
from my_extensions import TwoLayerNet
from torch import nn

from lostcities_cfr.commands.evaluate import main as evaluate_main
from lostcities_cfr.commands.fit import run
from lostcities_cfr.errors import CheckpointError, ConfigError
from lostcities_cfr.game import Rules, feature_size
from lostcities_cfr.training import DeepCFR, checkpoint, load_agent, load_model

TINY = Rules.tiny()


def test_a_config_builds_every_network_from_its_class_path(user_run):
    _, _, cli = user_run
    for net in cli.model.networks().values():
        assert isinstance(net, TwoLayerNet)
        assert net.body[0].out_features == 8  # init_args reach the constructor
        assert net.body[0].in_features == feature_size(TINY)


def test_print_config_shows_the_class_path_and_its_arguments(user_run, capsys):
    config, _, _ = user_run
    with pytest.raises(SystemExit):
        run("fit", ["--config", str(config), "--print_config"])
    printed = capsys.readouterr().out
    assert "class_path: my_extensions.TwoLayerNet" in printed and "hidden: 8" in printed


def test_its_checkpoint_loads_once_the_class_path_is_allowed(user_run, monkeypatch):
    _, run_dir, cli = user_run
    path = run_dir / "checkpoints" / "last.ckpt"
    with pytest.raises(
        CheckpointError, match=re.escape("allow_class_path('my_extensions.TwoLayerNet')")
    ):
        load_model(path)
    monkeypatch.setattr(checkpoint, "_ALLOWED_CLASS_PATHS", set())
    checkpoint.allow_class_path(TwoLayerNet)
    checkpoint.allow_class_path("my_extensions.OnPolicySampling")
    model = load_model(path)
    assert isinstance(model.strategy_net, TwoLayerNet)
    for name, tensor in cli.model.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], tensor)
    load_agent(path)  # plays as any checkpoint agent


def test_the_command_line_allows_it_through_the_environment(user_run, monkeypatch, capsys):
    _, run_dir, _ = user_run
    monkeypatch.setenv(
        checkpoint.CLASS_PATHS_VARIABLE, "my_extensions.TwoLayerNet, my_extensions.OnPolicySampling"
    )
    threads = torch.get_num_threads()
    evaluate_main(["--agent", f"ckpt:{run_dir}/checkpoints/last.ckpt", "--rules", "tiny"])
    torch.set_num_threads(threads)
    assert "vs random" in capsys.readouterr().out


def test_a_run_resumes_since_its_own_config_names_the_class(user_run):
    config, _, _ = user_run
    threads = torch.get_num_threads()
    cli = run("fit", ["--config", str(config), "--ckpt_path", "last", "--trainer.max_epochs", "3"])
    torch.set_num_threads(threads)
    assert cli.model.current_epoch == 3


def test_from_python_the_class_or_a_partial_of_it_serves(tmp_path):
    model = DeepCFR(rules="tiny", network=functools.partial(TwoLayerNet, hidden=4))
    assert all(net.body[0].out_features == 4 for net in model.networks().values())
    saved = checkpoint.plain_data(dict(model.hparams))["network"]
    assert saved == {"class_path": "my_extensions.TwoLayerNet", "init_args": {"hidden": 4}}
    assert checkpoint.plain_data(TwoLayerNet) == {"class_path": "my_extensions.TwoLayerNet"}


def test_a_network_of_other_outputs_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"DeepCFR network: .*expected outputs \[2, 15\]"):
        DeepCFR(rules="tiny", network=lambda n_features, n_actions: nn.Linear(n_features, 3))
