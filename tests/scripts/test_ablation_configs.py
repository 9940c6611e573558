"""scripts/tools/ablation_configs.py: the recipe with one ingredient off, each config a working run."""

import sys

import pytest
import yaml

from lostcities_cfr.callbacks import BestCheckpoint
from lostcities_cfr.cfr.budgeted_sampling import BudgetedSampling
from lostcities_cfr.cfr.color_network import ColorNet
from lostcities_cfr.cfr.escher import ESCHERSampling
from lostcities_cfr.cfr.networks import HiddenFeatures
from lostcities_cfr.commands.fit import build_cli
from lostcities_cfr.training import DeepCFR


@pytest.fixture
def written(load_script, monkeypatch, tmp_path, capsys):
    script = load_script("ablation_configs")
    monkeypatch.setattr(
        sys, "argv", ["ablation_configs.py", "--minutes", "25", "--out", str(tmp_path)]
    )
    script.main()
    assert capsys.readouterr().out.split() == [str(tmp_path / f"{v}.yaml") for v in script.VARIANTS]
    return {v: yaml.safe_load((tmp_path / f"{v}.yaml").read_text()) for v in script.VARIANTS}


def model_changes(recipe: dict, config: dict) -> dict:
    """The model fields whose values differ (added, removed or changed)."""
    a, b = recipe["model"], config["model"]
    return {k: b.get(k) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def test_each_variant_changes_only_its_ingredient_and_keeps_the_budget(written, tmp_path):
    recipe = written["recipe"]
    sampler = recipe["model"]["sampler"]["init_args"]
    changes = {name: model_changes(recipe, config) for name, config in written.items()}
    assert changes["recipe"] == {}
    assert changes["budgeted"]["sampler"]["class_path"].endswith("BudgetedSampling")
    assert set(changes["budgeted"]) == {
        "sampler",
        "traversals_per_player",
        "value_network",
        "value_buffer_size",
        "value_updates",
    }
    assert changes["mlp"] == {
        "network": {"width": 256, "depth": 3},
        "value_network": {"width": 256, "depth": 3},
    }
    assert changes["no_guide"]["sampler"]["init_args"] == {
        **sampler,
        "guide": None,
        "guide_weight": 0.0,
    }
    assert changes["no_cut"]["sampler"]["init_args"] == {**sampler, "max_decisions": None}
    assert changes["linear"] == {"weight_exponent": 1.0}
    blind = ["turn", "pile_draws"]
    for network in ("network", "value_network"):
        assert changes["no_length"][network] == {
            **recipe["model"][network],
            "hidden_features": blind,
        }
    for name, config in written.items():
        assert config["trainer"]["max_time"] == "00:00:25:00"
        assert config["trainer"]["default_root_dir"] == str(tmp_path / name)


def test_each_variant_saves_its_checkpoints_in_its_own_folder(written, tmp_path):
    cli = build_cli(["--config", str(tmp_path / "no_cut.yaml")], run=False)
    folder = tmp_path / "no_cut" / "checkpoints"
    assert cli.trainer.checkpoint_callback.dirpath == str(folder)
    best = next(c for c in cli.trainer.callbacks if isinstance(c, BestCheckpoint))
    best.setup(cli.trainer, cli.model, "fit")
    assert best.path == folder / "best.ckpt"


@pytest.mark.parametrize("name", ["budgeted", "mlp", "no_length"])
def test_a_variant_builds_its_model(written, tmp_path, name):
    cli = build_cli(["--config", str(tmp_path / f"{name}.yaml")], run=False)
    assert isinstance(cli.model, DeepCFR)
    if name == "budgeted":
        assert isinstance(cli.model.sampler, BudgetedSampling) and cli.model.value_net is None
    elif name == "mlp":
        assert isinstance(cli.model.sampler, ESCHERSampling)
        assert not isinstance(cli.model.strategy_net, ColorNet)
    else:
        for net in (cli.model.strategy_net, cli.model.value_net):
            assert isinstance(net, HiddenFeatures) and isinstance(net.net, ColorNet)
            assert net.hidden.numel() == 2
