import re

from tiny_runs import fit

from lostcities_cfr.callbacks import IterationProgressBar


def test_line_mode_prints_one_line_per_iteration_and_nothing_else(tmp_path, capsys):
    bar = IterationProgressBar(lines=True)
    fit(tmp_path, [bar], max_epochs=3, enable_progress_bar=True)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 3
    for i, line in enumerate(lines, start=1):
        assert re.match(rf"iteration {i}/3: [\d.]+ s \| traversal [\d.]+ s, ", line)
        assert "training 24 steps" in line  # 8 updates of each network, one a step
        assert "advantage_p0" in line


def test_bar_mode_titles_the_bar_by_iteration_and_shows_the_traversal(tmp_path, capsys):
    bar = IterationProgressBar(lines=False)
    fit(tmp_path, [bar], max_epochs=2, enable_progress_bar=True)
    assert bar.train_progress_bar.desc.startswith("iteration 2/2")
    assert set(bar._traversal) == {"traversal", "nodes/s", "batch"}
    assert "iteration 2/2" in capsys.readouterr().out


def test_bar_mode_redraws_the_rows_run_so_far_during_the_traversal(tmp_path, capsys):
    bar = IterationProgressBar(lines=False, traversal_refresh_s=0.001)
    fit(tmp_path, [bar], max_epochs=1, enable_progress_bar=True)
    drawn = re.findall(r"traversal \d+s, ([\d.]+k?) rows", capsys.readouterr().out)
    assert drawn, "no live traversal postfix was drawn"
    assert bar._traversal_watch is None  # the watcher stopped with the epoch
