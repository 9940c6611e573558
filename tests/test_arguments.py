"""Constructor arguments checked by their types, from Python and from a config alike."""

import inspect
from collections.abc import Sequence
from typing import Literal

import pytest

from lostcities_cfr.arguments import (
    ClosedUnitInterval,
    LeftOpenUnitInterval,
    PositiveInt,
    RightOpenUnitInterval,
    checked,
)
from lostcities_cfr.commands.fit import build_cli
from lostcities_cfr.errors import ConfigError


class Toy:
    @checked
    def __init__(
        self,
        count: PositiveInt = 1,
        share: ClosedUnitInterval = 0.5,
        mode: Literal["fast", "exact"] = "fast",
        limit: PositiveInt | None = None,
        sizes: Sequence[PositiveInt] = (1, 2),
        label: str = "toy",
    ) -> None:
        self.count, self.share, self.mode, self.limit, self.sizes = count, share, mode, limit, sizes


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"count": 0}, "Toy count=0; expected an int > 0"),
        ({"count": 2.5}, "Toy count=2.5; expected an int > 0"),
        ({"count": True}, "Toy count=True; expected an int > 0"),
        ({"count": "3"}, None),  # what a command line hands over: parsed, as jsonargparse does
        ({"share": 1.5}, "Toy share=1.5; expected a number >= 0 and <= 1"),
        ({"mode": "slow"}, "Toy mode='slow'; expected one of \\['fast', 'exact'\\]"),
        ({"limit": 0}, "Toy limit=0; expected an int > 0, or None"),
        ({"limit": None}, None),
        ({"sizes": [3, 0]}, "Toy sizes\\[1\\]=0; expected an int > 0"),
        ({"label": 7}, None),  # an annotation without a range is the constructor's business
    ],
)
def test_a_value_outside_its_type_is_refused_naming_the_class_and_field(arguments, message):
    if message is None:
        Toy(**arguments)
    else:
        with pytest.raises(ConfigError, match=f"^{message}$"):
            Toy(**arguments)


def test_checked_values_reach_the_constructor_as_plain_numbers():
    toy = Toy(count=PositiveInt(3), share=1, sizes=[PositiveInt(4)])
    assert type(toy.count) is int and type(toy.share) is float
    assert toy.sizes == [4] and type(toy.sizes[0]) is int


def test_the_decorated_signature_is_the_constructors():
    assert list(inspect.signature(Toy).parameters) == [
        "count",
        "share",
        "mode",
        "limit",
        "sizes",
        "label",
    ]


def test_half_open_intervals_keep_their_open_end():
    assert LeftOpenUnitInterval(1.0) == 1.0 and RightOpenUnitInterval(0.0) == 0.0
    for kind, value in ((LeftOpenUnitInterval, 0.0), (RightOpenUnitInterval, 1.0)):
        with pytest.raises(ValueError):
            kind(value)


def test_help_shows_each_arguments_range(capsys):
    with pytest.raises(SystemExit):  # the model is chosen by class_path: its own help
        build_cli(["fit", "--model.help", "DeepCFR"])
    shown = " ".join(capsys.readouterr().out.split())
    for needle in (
        "--model.batch_size BATCH_SIZE rows per update, over all ranks (each of N DDP ranks "
        "samples ``batch_size / N`` of them, rounded up, and their gradients are averaged), or "
        'on each rank with ``rank_scaling="updates"``. (type: PositiveInt,',
        "--model.rank_scaling {batch,updates} how N DDP ranks share",
        "(type: RightOpenUnitInterval, default: 0.0)",  # holdout
        "Literal['512x3', '1024x6']",  # the network presets
    ):
        assert needle in shown
