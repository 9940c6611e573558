"""A sweep's spec: its grid, search ranges and seeds as typed, the trials they make, and the
refusals of what cannot be a sweep."""

import pytest

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.sweeps.spec import (
    SearchRange,
    SweepSpec,
    parse_grid,
    parse_search,
    parse_seeds,
    setting_label,
)


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("seed_everything: 0\n")
    return str(path)


def test_a_grid_runs_every_combination_with_every_seed_seeds_innermost(config):
    grid = parse_grid(["model.a=1,2", "trainer.b=x"])
    spec = SweepSpec(configs=[config], seeds=[0, 5], grid=grid)
    assert spec.points() == [
        {"model.a": "1", "trainer.b": "x", "seed": 0},
        {"model.a": "1", "trainer.b": "x", "seed": 5},
        {"model.a": "2", "trainer.b": "x", "seed": 0},
        {"model.a": "2", "trainer.b": "x", "seed": 5},
    ]
    assert spec.fit_args({"model.a": "2", "seed": 5}) == [
        "--config", config, "--model.a", "2", "--seed_everything", "5",
    ]  # fmt: skip
    assert setting_label({"model.a": "2", "seed": 5}) == "model.a=2"
    assert setting_label({"seed": 5}) == "config"


def test_seeds_are_a_count_or_a_list():
    assert parse_seeds("3") == [0, 1, 2]
    assert parse_seeds("4,9") == [4, 9]
    assert parse_seeds("4,") == [4]
    for bad in ("0", "x", "1,y", ","):
        with pytest.raises(ConfigError, match="--seeds"):
            parse_seeds(bad)


def test_search_ranges_parse_and_bad_ones_are_named():
    assert parse_search(["model.lr=0.0001:0.01:log"]) == {"model.lr": SearchRange(1e-4, 0.01, True)}
    assert parse_search(["--model.lr=1:2"]) == {"model.lr": SearchRange(1.0, 2.0, False)}
    for bad, reason in [
        ("model.lr=2:1", "LOW must be below HIGH"),
        ("model.lr=0:1:log", "log range needs LOW above 0"),
        ("model.lr=a:b", "expected NAME=LOW:HIGH"),
        ("model.lr=1:2:cube", "expected NAME=LOW:HIGH"),
        ("model lr=1:2", "expected NAME=LOW:HIGH"),
        ("seed_everything=1:2", "seeds are given with --seeds"),
    ]:
        with pytest.raises(ConfigError, match=reason):
            parse_search([bad])


def test_grid_values_and_names_are_checked():
    with pytest.raises(ConfigError, match="set twice"):
        parse_grid(["model.a=1", "model.a=2"])
    with pytest.raises(ConfigError, match="an empty value"):
        parse_grid(["model.a=1,,2"])
    with pytest.raises(ConfigError, match="expected NAME=V1,V2"):
        parse_grid(["model.a"])


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"seeds": []}, "at least one seed"),
        ({"seeds": [1, 1]}, "listed twice"),
        (
            {"grid": {"a": ["1"]}, "search": {"b": SearchRange(0, 1)}, "trials": 2, "metric": "m"},
            "a grid or a search",
        ),
        (
            {"search": {"b": SearchRange(0, 1)}, "seeds": [0, 1], "trials": 2, "metric": "m"},
            "each search trial runs one seed",
        ),
        ({"search": {"b": SearchRange(0, 1)}, "metric": "m"}, "needs --trials"),
        ({"search": {"b": SearchRange(0, 1)}, "trials": 2}, "needs --metric"),
        ({"trials": 3}, "goes with --search"),
        ({"configs": ["no/such.yaml"]}, "no/such.yaml"),
    ],
)
def test_what_cannot_be_a_sweep_is_refused_naming_the_flag(config, fields, message):
    with pytest.raises(ConfigError, match=message):
        SweepSpec(**{"configs": [config], **fields})


def test_a_spec_round_trips_and_names_its_differences(config, tmp_path):
    spec = SweepSpec(configs=[config], seeds=[0, 1], grid={"model.a": ["1", "2"]}, metric="m")
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    other = SweepSpec(configs=[config], seeds=[0, 1, 2], grid={"model.a": ["1", "2"]}, metric="m")
    assert spec.differences(other) == ["seeds [0, 1, 2] (the sweep's: [0, 1])"]
    # the same path with other contents is another experiment
    (tmp_path / "c.yaml").write_text("seed_everything: 1\n")
    edited = SweepSpec(configs=[config], seeds=[0, 1], grid={"model.a": ["1", "2"]}, metric="m")
    assert [d.split(" ")[0] for d in spec.differences(edited)] == ["config_digests"]


def test_the_direction_follows_the_metric_unless_given(config):
    spec = SweepSpec(configs=[config])
    assert spec.better("nash_conv") == "minimize"
    assert spec.better("exploitability") == "minimize"
    assert spec.better("eval/current/random/win_rate") == "maximize"
    assert SweepSpec(configs=[config], direction="minimize").better("win_rate") == "minimize"


def test_a_grid_grows_by_seeds_and_values_and_nothing_else(config):
    spec = SweepSpec(configs=[config], seeds=[0, 1], grid={"model.a": ["1"]})
    assert spec.grows_to(SweepSpec(configs=[config], seeds=[0, 1, 2], grid={"model.a": ["1", "2"]}))
    assert not spec.grows_to(SweepSpec(configs=[config], seeds=[1, 2], grid={"model.a": ["1"]}))
    assert not spec.grows_to(SweepSpec(configs=[config], seeds=[0, 1], grid={"model.a": ["2"]}))
    assert not spec.grows_to(
        SweepSpec(configs=[config], seeds=[0, 1, 2], grid={"model.a": ["1"]}, metric="m")
    )
    assert not spec.grows_to(SweepSpec(configs=[config], seeds=[0, 1], grid={"model.b": ["1"]}))
