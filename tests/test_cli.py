"""The console entry point's process-wide settings."""

import os
import subprocess
import sys


def test_cli_uses_one_blas_thread_unless_told_otherwise():
    code = "import npu_sim.cli, os; print(os.environ['OPENBLAS_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
    env["OPENBLAS_NUM_THREADS"] = "3"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "3"


def test_help_states_the_exit_codes(capsys):
    from npu_sim.cli import main

    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for fragment in ("0 success", "2 any problem with what you gave", "1 an internal error", "130 interrupted"):
        assert fragment in text


def test_run_and_exec_document_their_budgets(capsys):
    from npu_sim.cli import main

    for command in ("run", "exec"):
        assert main([command, "--help"]) == 0
        text = capsys.readouterr().out
        for option in ("--max-memory", "--timeout", "--max-loop-work"):
            assert option in text
