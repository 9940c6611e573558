"""The strength recipe with one ingredient off: configs for the ablation table.

Reads ``configs/classic_strong.yaml`` and writes one config per variant to ``--out``
(``<out>/<variant>.yaml``, each run saving under ``<out>/<variant>/``: its checkpoints, the
recipe's ``best.ckpt``, and ``final.ckpt``, the networks the budget ends on), all with the
same ``trainer.max_time`` of ``--minutes``:

- ``recipe``: the config as shipped;
- ``budgeted``: Deep CFR's playout sampler (``BudgetedSampling``, as
  ``configs/classic_512x3.yaml`` sets it) instead of ESCHER, so no value network;
- ``mlp``: 256x3 MLPs instead of the colour-equivariant networks;
- ``no_guide``: ESCHER's sampling policy without ``heuristic:balanced`` (uniform and sigma);
- ``no_cut``: no truncation of long rounds (``max_decisions: null``);
- ``linear``: linear CFR's iteration weights (``weight_exponent: 1``) instead of t^1.5;
- ``no_length``: networks blind to the game-length features (``turn``, ``pile_draws``).

    python scripts/tools/ablation_configs.py --minutes 25 --out runs/ablations
    python -m lostcities_cfr fit --config runs/ablations/budgeted.yaml
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable
from pathlib import Path

import yaml

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "classic_strong.yaml"


def budgeted(model: dict) -> None:
    model["sampler"] = {
        "class_path": "lostcities_cfr.cfr.budgeted_sampling.BudgetedSampling",
        "init_args": {
            "walkers": 280,
            "utility_scale": 100.0,
            "exploration": 0.5,
            "branch_prob": 0.05,
            "max_branches": 4,
        },
    }
    model["traversals_per_player"] = 280
    for field in ("value_network", "value_buffer_size", "value_updates"):
        del model[field]


def mlp(model: dict) -> None:
    model["network"] = {"width": 256, "depth": 3}
    model["value_network"] = {"width": 256, "depth": 3}


def no_guide(model: dict) -> None:
    model["sampler"]["init_args"].update(guide=None, guide_weight=0.0)


def no_cut(model: dict) -> None:
    model["sampler"]["init_args"]["max_decisions"] = None


def linear(model: dict) -> None:
    model["weight_exponent"] = 1.0


def no_length(model: dict) -> None:
    for network in ("network", "value_network"):
        model[network]["hidden_features"] = ["turn", "pile_draws"]


VARIANTS: dict[str, Callable[[dict], None]] = {
    "recipe": lambda model: None,
    "budgeted": budgeted,
    "mlp": mlp,
    "no_guide": no_guide,
    "no_cut": no_cut,
    "linear": linear,
    "no_length": no_length,
}


def variant(recipe: dict, name: str, minutes: int, out: Path) -> dict:
    """``recipe`` with ``name``'s ingredient off, saving under ``out/name``."""
    config = copy.deepcopy(recipe)
    root = str(out / name)
    trainer = config["trainer"]
    trainer["max_time"] = f"00:{minutes // 60:02d}:{minutes % 60:02d}:00"
    trainer["default_root_dir"] = root
    for logger in trainer["logger"]:  # they log in the run's folder; W&B names the variant
        if "Wandb" in logger["class_path"]:
            logger.setdefault("init_args", {})["name"] = name
    VARIANTS[name](config["model"])
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=25, help="trainer.max_time of each")
    parser.add_argument("--out", type=Path, default=Path("runs/ablations"))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    recipe = yaml.safe_load(RECIPE.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.variants:
        path = args.out / f"{name}.yaml"
        path.write_text(
            yaml.safe_dump(variant(recipe, name, args.minutes, args.out), sort_keys=False)
        )
        print(path)


if __name__ == "__main__":
    main()
