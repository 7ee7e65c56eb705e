"""The ``npu-sim`` command line.

Every command lives in its own module under :mod:`npu_sim.commands` and
registers itself on :data:`app`. Errors: an :class:`~npu_sim.errors.NpuSimError`
prints one line to stderr and exits 2; any other exception is a bug and exits 1
with one line (``--debug`` shows the traceback).
"""

from __future__ import annotations

import os
import sys

# The kernels multiply many small tiles; a multi-threaded BLAS spends more time starting
# and synchronising threads than computing them (and competes with other processes for
# the cores). One thread, unless the user chose otherwise. Set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer  # noqa: E402

from npu_sim.errors import NpuSimError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="npu-sim: a timed, bit-exact simulation model of a TOSA NPU.",
)
_state = {"debug": False}


@app.callback()
def _global_options(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of internal errors."),
) -> None:
    _state["debug"] = debug


def _register_commands() -> None:
    from npu_sim.commands import COMMAND_MODULES

    for module in COMMAND_MODULES:
        module.register(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    _state["debug"] = "--debug" in args
    _register_commands()
    try:
        app(args=args, standalone_mode=False)
    except NpuSimError as exc:
        if _state["debug"]:
            raise
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        return 2
    except MemoryError as exc:  # the graph asks for more memory than this machine has
        if _state["debug"]:
            raise
        print(f"error: out of memory: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except typer.TyperException as exc:  # usage errors: bad option, missing argument
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        print(f"error: {_one_line(message)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: one line unless --debug
        if _state["debug"]:
            raise
        print(f"internal error ({type(exc).__name__}): {_one_line(str(exc))} "
              "(rerun with --debug for the traceback)", file=sys.stderr)
        return 1
    return 0


def _one_line(text: str) -> str:
    return " ".join(text.split())


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
