"""`deploy/run-local status`, `chaos` and `down` print their answer alone: the set-up they source
speaks only when it does something, and the suite's own run of it has done everything already."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command, answer", [
    (["status"], "no stack is running"),
    (["down"], "no stack is running"),
    (["chaos", "heal"], "no stack is running (or it is still starting)"),
])
def test_a_subcommand_without_a_stack_prints_its_answer_alone(tmp_path, command, answer):
    out = subprocess.run([str(ROOT / "deploy" / "run-local"), "--run-dir", str(tmp_path), *command],
                         capture_output=True, text=True, timeout=120)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].endswith(answer), lines
