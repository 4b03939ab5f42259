"""One-shot commands (diagnose, facts, inspect) run with a slow-paced cyclic collector and freeze
what they made when they end (engine/cli.py `_one_shot`): an in-process caller gets its collector
back as it was, and the next command makes the frozen objects collectable again."""
from __future__ import annotations

import gc
import json

import pytest
from click.testing import CliRunner

from precdx import cli
from precdx.cli import main


@pytest.fixture
def restore_gc():
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    cli._froze = False
    gc.set_threshold(*before)


def test_the_collector_is_slow_paced_during_the_command_and_as_it_was_after(restore_gc, monkeypatch, shared_dir):
    seen = []
    real = cli.diagnose.callback.__wrapped__

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    gc.set_threshold(700, 10, 10)
    monkeypatch.setattr(cli.diagnose, "callback", cli._one_shot(spy))
    result = CliRunner().invoke(main, ["diagnose", str(shared_dir / "scenarios" / "case-01"), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["verdict"]
    assert seen == [(200_000, 20, 20)]
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() > 0  # what the command made is left out of later passes


def test_the_next_command_unfreezes_what_the_last_one_froze(restore_gc, shared_dir):
    counts = []

    @cli._one_shot
    def command():
        counts.append(gc.get_freeze_count())

    command()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    command()
    assert counts[1] == 0  # unfrozen when the second command started
    assert gc.get_freeze_count() > 0


def test_the_commands_that_read_a_case_once_are_one_shot():
    def one_shot(command) -> bool:
        return getattr(command.callback, "one_shot", False)

    for name in ("diagnose", "facts", "inspect"):
        assert one_shot(main.commands[name]), name
    for name in ("serve", "mcp"):  # long-running: the collector keeps its pace
        assert name in main.commands and not one_shot(main.commands[name]), name


def test_a_one_shot_command_tunes_the_allocator_once(restore_gc, monkeypatch):
    """engine/cli.py tune_allocator: a one-shot command asks for it (glibc's thresholds are set
    once per process: True from then on); without glibc nothing is done."""
    import platform
    import subprocess
    import sys

    real = cli.tune_allocator
    calls = []
    monkeypatch.setattr(cli, "tune_allocator", lambda: calls.append(1) or True)
    cli._one_shot(lambda: None)()
    assert calls == [1]
    # in a fresh process (the setting is process-wide): applied on Linux with glibc, and kept
    code = "from precdx.cli import tune_allocator as t; print(t(), t())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert out == (["True", "True"] if glibc else ["False", "False"])
    monkeypatch.setattr(cli, "_TUNED", False)
    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: ("musl", "1.2"))
    assert real() is False
