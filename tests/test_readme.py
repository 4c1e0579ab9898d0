"""The README's command block names only commands and options the CLI has (it drifts otherwise)."""

from __future__ import annotations

import re
import shlex

import click
import pytest

from harness import PROJECT_ROOT
from harness.cli import main


def _readme_commands(text: str) -> list[list[str]]:
    block = re.search(r"## Main commands\s+```bash\n(.*?)```", text, re.S)
    assert block, "README.md: no ```bash block under '## Main commands'"
    lines = [line.split("  #")[0].strip() for line in block.group(1).splitlines()]
    return [
        shlex.split(line.replace("[", "").replace("]", "")) for line in lines if line.startswith("solbench")
    ]


def _options(command: click.Command) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)}


def _check(text: str) -> None:
    commands = _readme_commands(text)
    assert len(commands) >= 10
    seen = set()
    for words in commands:
        command: click.Command = main
        for word in words[1:]:  # the (sub)command path, as far as it goes
            if isinstance(command, click.Group) and not word.startswith("-"):
                assert word in command.commands, f"README: `{' '.join(words)}`: no command {word!r}"
                command = command.commands[word]
        seen.add(command.name)
        flags = {w.split("=")[0] for w in words if w.startswith("-")}
        assert flags <= _options(command), f"README: `{' '.join(words)}`: {sorted(flags - _options(command))}"
    assert {"run", "report", "compare", "pack", "submit", "build"} <= seen


def test_readme_commands_exist_with_their_options():
    _check((PROJECT_ROOT / "README.md").read_text())


def test_the_check_catches_a_missing_command_or_option():
    text = (PROJECT_ROOT / "README.md").read_text()
    for old, new, what in (
        ("solbench report ab.jsonl --runs", "solbench report ab.jsonl --runz", "--runz"),
        ("solbench compare old.jsonl", "solbench comparre old.jsonl", "comparre"),
    ):
        broken = text.replace(old, new)
        assert broken != text
        with pytest.raises(AssertionError, match=what):
            _check(broken)
