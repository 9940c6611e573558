"""The "Extending" section of docs/architecture.md shows the code and config lines that
this folder's tests use, word for word."""

import re
from pathlib import Path

import yaml
from extending_config import user_config

HERE = Path(__file__).resolve().parent
DOCS = HERE.parents[1] / "docs" / "architecture.md"


def extending_blocks(language: str) -> list[str]:
    section = DOCS.read_text().split("\n## Extending\n", 1)[1]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def test_every_python_example_is_code_the_tests_run():
    source = (HERE / "my_extensions.py").read_text()
    examples = extending_blocks("python")
    assert len(examples) == 4  # a sampler, a network, a callback, an agent
    for example in examples:
        assert example.strip() in source


def test_every_config_example_is_part_of_the_tests_config():
    config = user_config(Path("run"))

    def contained(part: object, whole: object) -> bool:
        if isinstance(part, dict):
            return isinstance(whole, dict) and all(
                contained(value, whole.get(key)) for key, value in part.items()
            )
        if isinstance(part, list):
            return isinstance(whole, list) and all(item in whole for item in part)
        return part == whole

    examples = extending_blocks("yaml")
    assert len(examples) == 3
    for example in examples:
        assert contained(yaml.safe_load(example), config), example
