"""Terminal play driven by scripted input: the board, numbered moves, re-prompts on bad
input, quitting, matches, and the explained final scores."""

import io
import itertools

import pytest

from lostcities_cfr.commands import main as cli_main
from lostcities_cfr.commands.play import main
from lostcities_cfr.game import Rules
from lostcities_cfr.game.text import explain_expedition


class Script:
    """Answers prompts from a list, then repeats ``then`` (or ends the input)."""

    def __init__(self, answers: list[str], then: str | None = "1") -> None:
        tail = itertools.repeat(then) if then is not None else iter(())
        self.answers = itertools.chain(answers, tail)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        answer = next(self.answers, None)
        if answer is None:
            raise EOFError
        return answer


def run(argv: list[str], script: Script) -> str:
    lines: list[str] = []
    main(argv, read=script, write=lines.append)
    return "\n".join(lines)


def test_a_scripted_round_runs_to_the_explained_final_scores():
    script = Script(["x", "0", "99", "h", "b"])
    out = run(["--opponent", "heuristic:balanced", "--seed", "3"], script)
    # bad input asks again, without spending a move
    assert "'x' is not a move: enter a number from 1 to 16." in out
    assert "'0' is not a move" in out and "'99' is not a move" in out
    assert "wagers (*) go" in out  # the help
    assert script.prompts[0].startswith("Your move (1-16")
    assert script.prompts[:6] == [script.prompts[0]] * 6
    # the board and the moves
    assert "discard pile (top last)" in out and "Your hand: R9 G4 G8 G9 B* B3 W2 Y6" in out
    assert "play:    1) R9   2) G4" in out
    assert "Opponent plays" in out and "You drew" in out
    # the end: every expedition of both players explained, then the verdict
    assert "Round over after" in out
    you, opponent = out.split("\nYou: ")[1], out.split("\nOpponent: ")[1]
    for block in (you, opponent):
        for color in ("red", "green", "blue", "white", "yellow"):
            assert f"  {color}" in block
    assert out.splitlines()[-1].startswith(("You win", "The opponent wins", "A draw"))
    # what the agent's decisions cost, over every one it took
    lines = out.splitlines()
    decisions = sum(
        line.startswith(("Opponent plays", "Opponent discards", "Opponent draws", "Opponent takes"))
        for line in lines
    )
    cost = next(line for line in lines if line.startswith("The opponent took "))
    assert decisions > 10 and cost.endswith(f" ms, {decisions} decisions).")
    assert lines.index(cost) == len(lines) - 2  # after the scores, before the verdict


def test_quitting_or_ending_the_input_abandons_the_game():
    assert run(["--opponent", "random", "--seed", "0"], Script(["q"])).endswith("Game abandoned.")
    out = run(["--opponent", "random", "--seed", "0"], Script(["1"], then=None))
    assert out.endswith("Game abandoned.")


def test_a_three_round_match_alternates_who_moves_first_and_sums_the_scores():
    out = run(
        ["--opponent", "discard-only", "--rounds", "3", "--rules", "tiny", "--seed", "1"],
        Script([]),
    )
    assert "Round 1 of 3: you move first." in out
    assert "Round 2 of 3: the opponent moves first." in out
    assert "Round 3 of 3: you move first." in out
    assert "Match over." in out


@pytest.mark.parametrize(
    ("ranks", "text"),
    [
        ([], "not started: 0"),
        ([2, 3, 4], "R3 R4 R5: (12 - 20) = -8"),
        ([0, 1, 2, 3, 4, 5, 6, 7], "R* R2 R3 R4 R5 R6 R7 R8: (35 - 20) x 2 + 20 bonus = 50"),
        ([0, 0, 4, 5, 6, 7, 8, 9], "R* R* R5 R6 R7 R8 R9 R10: (45 - 20) x 3 + 20 bonus = 95"),
    ],
)
def test_expedition_scores_are_explained_term_by_term(ranks, text):
    assert explain_expedition(Rules.classic(), 0, ranks) == text


def test_the_play_command_reads_stdin_through_the_cli(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("1\n" * 200))
    cli_main(["play", "--opponent", "random", "--rules", "tiny", "--seed", "2"])
    out = capsys.readouterr().out
    assert "Round over after" in out


def test_digits_that_are_no_decimal_number_are_asked_again():
    # '²' and '١' are digits to str.isdigit; int() refuses the first and reads the second
    script = Script(["²", "¹", "１"])
    out = run(["--opponent", "random", "--seed", "3"], script)
    assert "'²' is not a move" in out and "'¹' is not a move" in out
    assert "'１' is not a move" not in out  # a fullwidth 1 is the number 1
    assert "Round over after" in out


def test_a_bad_opponent_spec_exits_with_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--opponent", "heuristic:reckless"], read=Script([]), write=print)
    assert exit_.value.code == 2
    assert "unknown heuristic preset 'reckless'" in capsys.readouterr().err
