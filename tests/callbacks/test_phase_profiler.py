import json

from tiny_runs import fit

from lostcities_cfr.callbacks import PhaseProfiler


def test_profiles_the_chosen_iteration_with_both_phases_marked(tmp_path):
    profiler = PhaseProfiler(iterations=[2], dirpath=str(tmp_path / "profile"))
    fit(tmp_path, [profiler], max_epochs=2)
    files = sorted(p.name for p in (tmp_path / "profile").iterdir())
    assert files == ["iteration_2.json", "iteration_2.txt"]
    table = (tmp_path / "profile" / "iteration_2.txt").read_text()
    assert "cfr/traversal" in table and "cfr/training" in table
    trace = json.loads((tmp_path / "profile" / "iteration_2.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {"cfr/traversal", "cfr/training"} <= names
