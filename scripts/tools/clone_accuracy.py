"""How well each network shape can copy a teacher: behaviour cloning on fixed data.

The teacher (an agent spec, ``heuristic:balanced`` by default) plays ``--iterations`` x 512
games against itself (``baselines.behaviour_cloning.teacher_games``); every network named by
``--network`` then takes ``--steps`` Adam steps of ``--batch`` rows on those moves
(``behaviour_cloning_loss``). Printed per network, every sixth of the steps: the seconds
spent and the share of the teacher's moves it predicts (greedy) on one more, held-out
iteration of games; at the end its greedy play against the teacher (``--games`` duplicate
games). This is how docs/baselines.md chose the baselines' networks.

    python scripts/tools/clone_accuracy.py --network 128x2 256x2 64x2:colors [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from lostcities_cfr.agents import NetworkAgent, agent_from_spec
from lostcities_cfr.baselines.behaviour_cloning import behaviour_cloning_loss, teacher_games
from lostcities_cfr.cfr.networks import NetworkConfig, masked_softmax
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.game import Rules, feature_size


def parse_network(text: str) -> NetworkConfig:
    """``WIDTHxDEPTH[:colors]`` as a :class:`NetworkConfig`."""
    shape, _, kind = text.partition(":")
    width, depth = (int(x) for x in shape.split("x"))
    return NetworkConfig(width, depth, architecture=kind or "mlp")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", nargs="+", default=["128x2", "64x2:colors"])
    parser.add_argument("--teacher", default="heuristic:balanced")
    parser.add_argument("--iterations", type=int, default=12, help="x 512 games of data")
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--games", type=int, default=400, help="games against the teacher")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rules = Rules.classic()
    teacher = agent_from_spec(args.teacher, seed=0)
    data = [teacher_games(rules, teacher, 512, seed=1000 + i) for i in range(args.iterations)]
    held_out = teacher_games(rules, teacher, 512, seed=1000 + args.iterations)
    features = torch.cat([d.features for d in data])  # [N, F]
    legal = torch.cat([d.legal for d in data])  # [N, A]
    actions = torch.cat([d.actions for d in data])  # [N]
    report: dict = {"teacher": args.teacher, "rows": len(actions), "networks": {}}
    for name in args.network:
        torch.manual_seed(0)
        net = parse_network(name).build(feature_size(rules), rules.n_actions, rules)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-5)
        generator = torch.Generator().manual_seed(0)
        curve, spent = [], 0.0
        for step in range(1, args.steps + 1):
            start = time.perf_counter()
            index = torch.randint(len(actions), (args.batch,), generator=generator)
            loss = behaviour_cloning_loss(net(features[index]), legal[index], actions[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            spent += time.perf_counter() - start
            if step % max(args.steps // 6, 1) == 0:
                with torch.no_grad():
                    logits = net(held_out.features).masked_fill(~held_out.legal, -torch.inf)
                    accuracy = float((logits.argmax(1) == held_out.actions).float().mean())
                curve.append({"step": step, "seconds": spent, "held_out_accuracy": accuracy})
                if not args.json:
                    print(f"{name}: step {step}, {spent:.0f} s, held-out accuracy {accuracy:.3f}")
        with torch.no_grad():
            clone = NetworkAgent(net, masked_softmax, greedy=True, name=name)
            result = evaluate(clone, agent_from_spec(args.teacher, seed=1), args.games, rules)
        report["networks"][name] = {
            "parameters": sum(p.numel() for p in net.parameters()),
            "curve": curve,
            "win_rate_vs_teacher": result.rounds.win_rate,
            "ci": list(result.rounds.win_rate_ci),
        }
        if not args.json:
            low, high = result.rounds.win_rate_ci
            print(
                f"{name}: wins {result.rounds.win_rate:.1%} [{low:.1%}, {high:.1%}] of "
                f"{args.games} games against {args.teacher}"
            )
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
