"""The console entry point's process-wide settings."""

import os
import subprocess
import sys

from typer._adapters import try_build_adapter
from typer.models import OptionInfo

from npu_sim.cli import _UNCHANGED, _plain_value


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


def test_run_loads_no_module_only_other_commands_need(tmp_path):
    """A plain ``run`` imports neither the run page's modules (``--html``) nor matplotlib."""
    code = ("import sys; from npu_sim.cli import main; "
            f"main(['run', 'examples/ds_cnn_kws_int8.tosa', '--hw', 'edge', '--random-inputs', '0', "
            f"'-o', {str(tmp_path / 'out')!r}]); "
            "print(sorted(m for m in sys.modules if m.startswith(('reports.run_report', 'reports.gantt', "
            "'reports.html_page', 'matplotlib'))))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_plain_option_values_are_coerced_as_typer_coerces_them():
    """The CLI takes plain option values as they are (no pydantic adapter per option): the same
    values, of the same types, that typer's own coercion makes; anything else is left to typer."""
    values = ["0", "12", "-3", "007", "-0", "1_000", " 5", "5 ", "+5", "abc", "", "١٢", "123456789012345678",
              "1234567890123456789", 3, 0, -7, 3.5, 2.0, True, False, ("a", "b"), [], (), ["x"], ("a", 1)]
    taken = 0
    for annotation in (str, int, float, bool, list[str]):
        adapter = try_build_adapter(annotation, OptionInfo())
        for value in values:
            plain = _plain_value(annotation, value)
            if plain is _UNCHANGED:
                continue
            taken += 1
            expected = adapter.validate_python(value)
            assert (plain, type(plain)) == (expected, type(expected)), (annotation, value)
    assert taken >= 15
