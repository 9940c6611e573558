"""scripts/tools/clone_accuracy.py: networks fitted to a teacher's moves, scored on held-out games."""

import json
import sys

import pytest


def test_a_network_that_trains_predicts_more_of_the_teachers_moves(
    load_script, monkeypatch, capsys
):
    script = load_script("clone_accuracy")
    argv = ["clone_accuracy.py", "--network", "32x1", "8x1:colors", "--iterations", "1"]
    argv += ["--steps", "120", "--batch", "256", "--games", "4", "--json"]
    monkeypatch.setattr(sys, "argv", argv)
    script.main()
    report = json.loads(capsys.readouterr().out)
    assert report["teacher"] == "heuristic:balanced" and report["rows"] > 10_000
    for name in ["32x1", "8x1:colors"]:
        network = report["networks"][name]
        curve = [point["held_out_accuracy"] for point in network["curve"]]
        assert [point["step"] for point in network["curve"]] == [20, 40, 60, 80, 100, 120]
        assert curve[-1] > curve[0] and curve[-1] > 0.5  # the teacher is greedy: learnable
        assert 0 <= network["win_rate_vs_teacher"] <= 1
    colors = report["networks"]["8x1:colors"]["parameters"]
    assert colors < report["networks"]["32x1"]["parameters"]


def test_a_network_is_named_widthxdepth(load_script):
    script = load_script("clone_accuracy")
    assert script.parse_network("64x2:colors").architecture == "colors"
    assert (script.parse_network("128x3").width, script.parse_network("128x3").depth) == (128, 3)
    with pytest.raises(ValueError):
        script.parse_network("wide")
