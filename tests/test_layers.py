"""The package's layers (``docs/architecture.md``): imports point downward only, no module
imports itself through others (an import circle, type-only imports included), and the
documentation's picture of the layers is the one the imports draw."""

import ast
from pathlib import Path

import lostcities_cfr

PACKAGE = Path(lostcities_cfr.__file__).parent
# Lowest first, each with the sentence docs/architecture.md's picture gives it. Modules of
# one layer may import one another; the command-line modules and the package's front door
# sit on top.
LAYERS = [
    ("errors and argument types with their ranges", {"errors", "arguments"}),
    ("the game protocol and its games: Lost Cities' engines, Kuhn, Leduc, OpenSpiel's", {"game"}),
    ("heuristics, random play, networks, the agent-spec grammar", {"agents"}),
    ("duplicate matches, recordings, the league and its ratings", {"evaluation"}),
    ("the batched inference queue: one forward per network per step", {"inference"}),
    # decision-time search: the queue's forwards, below the models that hand it their values
    ("decision-time search over any agent", {"search"}),
    ("samplers, regret matching, reservoirs, networks, exact exploitability", {"cfr"}),
    # the baselines train beside Deep CFR, with its metrics and checkpoints
    (
        "the LightningModules (Deep CFR, PPO), their loop, run folders, checkpoints and DDP",
        {"training", "baselines"},
    ),
    ("evaluation, timing, compile toggles, checkpoints", {"callbacks"}),
    # runs fit in processes of its own, reads their metrics.csv; report plays their checkpoints
    (
        "sweeps: runs' logged metrics read back; a config over seeds and settings as an Optuna study; figures over seeds",
        {"sweeps"},
    ),
    ("a local web page: play an agent, replay recorded games", {"serve"}),
    (
        "each command parses its arguments and hands the work to the layers below",
        {"commands"},
    ),
    ("the front door: the names a notebook imports, and python -m", {"__init__", "__main__"}),
]
# The only modules at the package's top: its front door and the leaves every layer shares.
TOP_LEVEL = {"__init__", "__main__", "errors", "arguments"}
LONGEST_MODULE = 600  # lines: past this a module is split along its seams (docs/style)
DOCS = PACKAGE.parent / "docs" / "architecture.md"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    return next(i for i, (_, names) in enumerate(LAYERS) if top in names)


def imports(module: str, runtime: bool = False) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file, function bodies
    included; with ``runtime``, leaving out ``if TYPE_CHECKING:`` blocks (never executed)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if runtime and isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from lostcities_cfr.training import runs`` imports the module runs; ``from x import
            # name`` the module x.
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in MODULES else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(MODULES[module].read_text()))
    return {name for name in found if name in MODULES and name != module}


def test_every_module_is_in_a_layer():
    assert all(isinstance(layer(module), int) for module in MODULES)


def test_the_package_top_holds_only_its_front_door_and_shared_leaves():
    top = {path.stem for path in PACKAGE.glob("*.py")}
    assert top == TOP_LEVEL


def test_every_module_reads_in_one_sitting():
    long = {
        m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > LONGEST_MODULE
    }
    assert long == {}


def test_imports_point_downward_only():
    upward = [
        f"{module} -> {target}"
        for module in MODULES
        for target in imports(module)
        if layer(target) > layer(module)
    ]
    assert upward == []


def test_no_module_imports_itself_through_others():
    graph = {module: imports(module) for module in MODULES}  # type-only imports too
    circles = []

    def visit(module: str, path: list[str]) -> None:
        for target in graph[module]:
            if target in path:
                circles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in done:
                visit(target, [*path, target])
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert circles == []


def test_the_algorithm_layers_import_no_standard_game():
    """The samplers, the queue, the training modules and the baselines see the standard games
    only through the game protocol (``docs/games.md``): a config or a command names them."""
    games = {"lostcities_cfr.game.poker", "lostcities_cfr.game.openspiel_adapter"}
    games.add("lostcities_cfr.game.names")
    algorithms = [m for m in MODULES if m.split(".")[1:2] in (["cfr"], ["inference"], ["training"], ["baselines"])]  # fmt: skip
    assert algorithms
    found = {module: imports(module) & games for module in algorithms}
    assert {module: names for module, names in found.items() if names} == {}


def layer_picture() -> str:
    """The layers as a Mermaid flowchart drawn from the imports: each layer (its sentence and
    its packages), and an arrow from a layer to each lower one it imports, labelled with the
    number of module-to-module imports. ``python tests/test_layers.py`` prints it."""
    crossing: dict[tuple[int, int], int] = {}
    for module in MODULES:
        for target in imports(module):
            edge = (layer(module), layer(target))
            if edge[0] != edge[1]:
                crossing[edge] = crossing.get(edge, 0) + 1
    lines = ["```mermaid", "flowchart TD"]
    for i, (sentence, names) in reversed(list(enumerate(LAYERS))):
        shown = ", ".join(sorted(names))
        lines.append(f'    L{i}["<b>{shown}</b><br/>{sentence}"]')
    for (upper, lower), count in sorted(crossing.items(), key=lambda e: (-e[0][0], -e[0][1])):
        lines.append(f"    L{upper} -->|{count}| L{lower}")
    lines.append("```")
    return "\n".join(lines)


def test_the_architecture_docs_open_with_the_picture_of_the_imports():
    assert layer_picture() in DOCS.read_text(), (
        "docs/architecture.md must show `python tests/test_layers.py`'s picture"
    )


if __name__ == "__main__":
    print(layer_picture())
