"""Cut a training checkpoint down to its networks, for shipping an agent in the package.

Writes :func:`~lostcities_cfr.training.checkpoint.networks_only` of ``CKPT`` (the model
class, its arguments, the networks and the iteration; no optimizer, generators, snapshot
pool or reservoirs) to ``OUT``, checks that ``OUT`` loads with ``torch.load(weights_only=True)``
and plays exactly the moves of ``CKPT`` on a batch of seeded deals, and prints both sizes.
The package's ``best`` agent is made this way (``docs/agents.md``):

    python scripts/tools/export_agent.py runs/bc_ppo/checkpoints/last.ckpt lostcities_cfr/pretrained/best.pt
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from lostcities_cfr.game import GameBatch
from lostcities_cfr.training.checkpoint import load_agent, networks_only, read_checkpoint


def same_moves(a: Path, b: Path, games: int = 256, seed: int = 0) -> bool:
    """Whether the greedy agents of checkpoints ``a`` and ``b`` choose alike on fresh deals."""
    agent_a, agent_b = load_agent(a, greedy=True), load_agent(b, greedy=True)
    batch = GameBatch.new(agent_a.rules, games, seed=seed)
    return bool(torch.equal(agent_a.act(batch), agent_b.act(batch)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ckpt", type=Path, help="a checkpoint written by fit")
    parser.add_argument("out", type=Path, help="where the networks-only checkpoint goes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    slim = networks_only(read_checkpoint(args.ckpt))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(slim, args.out)
    torch.load(args.out, weights_only=True)  # refuses anything but tensors and plain data
    figures = {
        "source": str(args.ckpt),
        "out": str(args.out),
        "iteration": slim["iteration"],
        "source_bytes": args.ckpt.stat().st_size,
        "out_bytes": args.out.stat().st_size,
        "same_moves": same_moves(args.ckpt, args.out),
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"{figures['source']} (iteration {figures['iteration']}, "
            f"{figures['source_bytes'] / 1024:,.0f} KB) -> {figures['out']} "
            f"({figures['out_bytes'] / 1024:,.0f} KB); same moves: {figures['same_moves']}"
        )
    if not figures["same_moves"]:
        raise SystemExit("the exported networks do not play like the checkpoint's")


if __name__ == "__main__":
    main()
