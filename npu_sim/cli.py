"""The ``npu-sim`` command line: its commands, their options and their help.

What each command does is in :mod:`npu_sim.commands` (one module per command group), imported
when a command runs, so that ``npu-sim --help`` does not load the simulator. Errors: an
:class:`~npu_sim.errors.NpuSimError` prints one line to stderr and exits 2; any other
exception is a bug and exits 1 with one line (``--debug`` shows the traceback).
"""

from __future__ import annotations

import atexit
import gc
import os
import re
import sys
import threading

# The kernels multiply many small tiles; a multi-threaded BLAS spends more time starting
# and synchronising threads than computing them (and competes with other processes for
# the cores). One thread, unless the user chose otherwise. Set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from enum import Enum  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

import typer  # noqa: E402
import typer.core  # noqa: E402

from npu_sim.errors import NpuSimError  # noqa: E402
from npu_sim.run_limits import DEFAULT_LOOP_WORK_BYTES, DEFAULT_TIMEOUT_SECONDS  # noqa: E402

EXIT_CODES_HELP = ("Exit codes: 0 success; 2 any problem with what you gave (graph, inputs, config, "
                   "paths, a memory budget, --timeout); 1 an internal error, a bug in npu-sim "
                   "(--debug shows its traceback); 130 interrupted (Ctrl-C).")

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help=f"npu-sim: a timed, bit-exact simulation model of a TOSA NPU.\n\n{EXIT_CODES_HELP}",
)
hw_app = typer.Typer(no_args_is_help=True, help="Hardware configurations (presets and YAML files).")
_state = {"debug": False}

GRAPH_HELP = "A .tosa flatbuffer, its JSON form, TOSA MLIR text, or a .tflite model (the [tflite] extra)."
INPUT_HELP = "NAME=FILE.npy, or FILE.npy for the next input in order."
INVOCATIONS_HELP = "Invoke N times; each input file has a leading axis of length N."
RANDOM_HELP = "Seeded random data for missing inputs."
SPREAD_HELP = ("Use free TCM to avoid reusing freed bytes soon: fewer false dependencies "
               "(fewer cycles) for a larger peak_tcm_bytes.")
NO_COMPOSITE_HELP = ("Run composites such as LSTM cells op by op instead of as one fused NPU operation "
                     "(to compare the two).")
NO_BLOCK_TENSORS_HELP = ("Spill what the TCM plan cannot place whole instead of storing it as blocks in the "
                         "TCM's holes behind a pointer table (the plan without block tensors, for comparison).")
OPTIMISE_HELP = ("size: run chains of operations in horizontal stripes wherever that lowers the peak TCM, in "
                 "the stripes needing the fewest bytes, whatever they cost (Vela's --optimise Size); "
                 "performance: only where the config's stripes.slack_fraction allows (default: the config's "
                 "stripes.optimise).")
STRICT_NPU_HELP = ("Refuse an operator the preset's NPU cannot run (exit 2 naming it) instead of running "
                   "it on the host CPU.")
NO_CACHE_HELP = ("Compile anew (and convert a .tflite anew) instead of reusing what an earlier run kept "
                 "in the cache (see npu-sim cache info).")
TIMING_ONLY_HELP = ("The same cycles, bytes and figures without computing the tensors (faster; no outputs/, "
                    "summary.json says timing_only). A graph with control flow is computed anyway.")
VERIFY_HELP = ("Check the plan statically before using it: no two live allocations overlap, every "
               "read sees the bytes last written there, conflicting accesses are ordered. "
               "A rejected plan is an internal error (exit 1). Costs about one more schedule time.")


#: Exit code of an interrupted run (128 + SIGINT, as shells report it).
INTERRUPTED = 130
#: Python frames the CLI allows (the executor and the scheduler recurse per nesting level).
RECURSION_LIMIT = 8000

MAX_MEMORY_HELP = ("Host memory the job may use, e.g. 4G or 512M (default: 80% of what is available); "
                   "a graph that needs more is refused before any work.")
TIMEOUT_HELP = "Stop the job after this many seconds of wall-clock time (exit 2)."
LOOP_WORK_HELP = ("Bytes one WHILE_LOOP may write over all its iterations before it is stopped "
                  "(exit 2): bounds loops whose trip count comes from the data.")


INPUT_SHAPE_HELP = ("NAME=1x96x96x3: the shape of an input whose dimensions the graph leaves unknown "
                    "(default: from its -i file, else 1 for each unknown one).")


def input_shape_option() -> Any:
    return typer.Option([], "--input-shape", metavar="NAME=SHAPE", help=INPUT_SHAPE_HELP)


ALLOW_UNPREDICTABLE_HELP = ("Finish a run whose data break a TOSA REQUIRE (random weights often do): "
                            "warn once and report tosa_status 'unpredictable' in summary.json; the "
                            "cycles stay valid. ERROR_IFs (a wrong graph) stay errors.")


def max_memory_option() -> Any:
    return typer.Option(None, "--max-memory", metavar="SIZE", help=MAX_MEMORY_HELP)


def timeout_option() -> Any:
    return typer.Option(DEFAULT_TIMEOUT_SECONDS, "--timeout", metavar="SECONDS", help=TIMEOUT_HELP)


def loop_work_option() -> Any:
    return typer.Option(DEFAULT_LOOP_WORK_BYTES, "--max-loop-work", metavar="BYTES", help=LOOP_WORK_HELP)


def _commands() -> ModuleType:
    """The command implementations: the whole simulator, imported only when a command runs."""
    import npu_sim.commands

    if _state.pop("collector_paused", False):   # by run(): what exists now lives as long as the process
        gc.freeze()
        gc.enable()
    return npu_sim.commands


class Optimise(str, Enum):
    """``--optimise``: what the planner favours (HwConfig ``stripes.optimise``)."""

    performance = "performance"
    size = "size"


def optimise_option() -> Any:
    """``--optimise size|performance`` (None: as the config says)."""
    return typer.Option(None, "--optimise", help=OPTIMISE_HELP, case_sensitive=False)


def tosa_level_option() -> Any:
    """``--tosa-level 8K|none``: the TOSA level a graph is loaded at (:mod:`npu_sim.tosa.levels`)."""
    return typer.Option("8K", "--tosa-level", metavar="LEVEL",
                        help="TOSA level the graph's operator arguments must respect: 8K (ranks up "
                             "to 6, kernels up to 8192, ..., as Arm's reference model) or none.")


@app.callback()
def _global_options(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of internal errors."),
) -> None:
    _state["debug"] = debug


@app.command("inspect")
def inspect_command(
    graph: str = typer.Argument(..., help=GRAPH_HELP),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON dict instead of tables."),
    tosa_level: str = tosa_level_option(),
) -> None:
    """Describe a TOSA graph: version, signature, blocks, operators, tensors, profiles."""
    _commands().inspect_cmd.inspect(graph, json_output, tosa_level)


@app.command("exec")
def exec_command(
    graph: str = typer.Argument(..., help=GRAPH_HELP),
    inputs: list[str] = typer.Option([], "-i", "--input", help=INPUT_HELP),
    invocations: int | None = typer.Option(None, "-n", "--invocations", help=INVOCATIONS_HELP),
    out_dir: str = typer.Option(..., "-o", "--out-dir", help="Where outputs/ and summary.json go."),
    random_inputs: int | None = typer.Option(None, "--random-inputs", metavar="SEED", help=RANDOM_HELP),
    tosa_level: str = tosa_level_option(),
    max_memory: str | None = max_memory_option(),
    timeout: float = timeout_option(),
    max_loop_work: int = loop_work_option(),
    input_shape: list[str] = input_shape_option(),  # noqa: B008 (typer reads the list)
    allow_unpredictable: bool = typer.Option(False, "--allow-unpredictable", help=ALLOW_UNPREDICTABLE_HELP),
) -> None:
    """Run GRAPH in the bit-exact reference executor; write its outputs and a summary."""
    _commands().exec_cmd.exec_graph(graph, inputs, out_dir, invocations=invocations, random_seed=random_inputs,
                                    tosa_level=tosa_level, max_memory=max_memory, timeout_seconds=timeout,
                                    max_loop_work_bytes=max_loop_work, input_shapes=input_shape,
                                    allow_unpredictable=allow_unpredictable)


app.add_typer(hw_app, name="hw")   # (here: the help lists the commands in this order)


@hw_app.command("list")
def hw_list_command() -> None:
    """List the bundled presets with what each resembles."""
    _commands().hw_cmd.hw_list()


@hw_app.command("show")
def hw_show_command(
    config: str = typer.Argument(..., help="A preset name or a YAML file path."),
    json_output: bool = typer.Option(False, "--json", help="Print JSON instead of YAML."),
) -> None:
    """Print a config fully resolved (``extends`` merged, defaults filled in)."""
    _commands().hw_cmd.hw_show(config, json_output)


@app.command("run")
def run_command(
    graph: str = typer.Argument(..., help=GRAPH_HELP),
    hw: str = typer.Option(..., "--hw", help="Hardware config: a preset name (edge, tiny, ...) or a YAML file."),
    inputs: list[str] = typer.Option([], "-i", "--input", help=INPUT_HELP),
    invocations: int | None = typer.Option(None, "-n", "--invocations", help=INVOCATIONS_HELP),
    out_dir: str = typer.Option(..., "-o", "--out-dir",
                                 help="Where outputs/, summary.json, memory_timeline.png and trace.json go."),
    random_inputs: int | None = typer.Option(None, "--random-inputs", metavar="SEED", help=RANDOM_HELP),
    spread_tcm: bool = typer.Option(False, "--spread-tcm", help=SPREAD_HELP),
    verify: bool = typer.Option(False, "--verify", help=VERIFY_HELP),
    tosa_level: str = tosa_level_option(),
    max_memory: str | None = max_memory_option(),
    timeout: float = timeout_option(),
    max_loop_work: int = loop_work_option(),
    input_shape: list[str] = input_shape_option(),  # noqa: B008 (typer reads the list)
    allow_unpredictable: bool = typer.Option(False, "--allow-unpredictable", help=ALLOW_UNPREDICTABLE_HELP),
    no_composite_fusion: bool = typer.Option(False, "--no-composite-fusion", help=NO_COMPOSITE_HELP),
    html: bool = typer.Option(False, "--html", help="Also write report.html (the run's page; see npu-sim report)."),
    strict_npu: bool = typer.Option(False, "--strict-npu", help=STRICT_NPU_HELP),
    timing_only: bool = typer.Option(False, "--timing-only", help=TIMING_ONLY_HELP),
    no_block_tensors: bool = typer.Option(False, "--no-block-tensors", help=NO_BLOCK_TENSORS_HELP),
    optimise: Optimise | None = optimise_option(),  # noqa: B008 (typer reads the option)
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
) -> None:
    """Simulate GRAPH on the NPU that CONFIG describes; write outputs and a timing report."""
    _commands().run_cmd.run_graph(graph, hw, inputs, out_dir, invocations=invocations, random_seed=random_inputs,
                                  spread_tcm=spread_tcm, verify=verify, tosa_level=tosa_level,
                                  max_memory=max_memory, timeout_seconds=timeout, max_loop_work_bytes=max_loop_work,
                                  input_shapes=input_shape, allow_unpredictable=allow_unpredictable,
                                  composite_fusion=not no_composite_fusion, html=html, strict_npu=strict_npu,
                                  timing_only=timing_only, block_tensors=not no_block_tensors,
                                  optimise=optimise.value if optimise else None, use_cache=not no_cache)


@app.command("plan")
def plan_command(
    graph: str = typer.Argument(..., help=GRAPH_HELP),
    hw: str = typer.Option(..., "--hw", help="Hardware config: a preset name or a YAML file."),
    as_json: bool = typer.Option(False, "--json", help="Print only the statistics, as JSON."),
    spread_tcm: bool = typer.Option(False, "--spread-tcm", help=SPREAD_HELP),
    verify: bool = typer.Option(False, "--verify", help=VERIFY_HELP),
    tosa_level: str = tosa_level_option(),
    timeout: float = timeout_option(),
    input_shape: list[str] = input_shape_option(),  # noqa: B008 (typer reads the list)
    no_composite_fusion: bool = typer.Option(False, "--no-composite-fusion", help=NO_COMPOSITE_HELP),
    strict_npu: bool = typer.Option(False, "--strict-npu", help=STRICT_NPU_HELP),
    no_block_tensors: bool = typer.Option(False, "--no-block-tensors", help=NO_BLOCK_TENSORS_HELP),
    optimise: Optimise | None = optimise_option(),  # noqa: B008 (typer reads the option)
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
) -> None:
    """Compile GRAPH for CONFIG and print the Program (memory plan + commands) and plan statistics."""
    _commands().run_cmd.plan_graph(graph, hw, as_json, spread_tcm=spread_tcm, verify=verify, tosa_level=tosa_level,
                                   timeout_seconds=timeout, input_shapes=input_shape,
                                   composite_fusion=not no_composite_fusion, strict_npu=strict_npu,
                                   block_tensors=not no_block_tensors,
                                   optimise=optimise.value if optimise else None, use_cache=not no_cache)


@app.command("convert")
def convert_command(
    graph: str = typer.Argument(..., help=GRAPH_HELP),
    out_path: str = typer.Option(..., "-o", "--output", help="The graph to write: OUT.tosa or OUT.json."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Convert a .tflite anew instead of reusing "
                                  "the cached conversion."),
    tosa_level: str = tosa_level_option(),
) -> None:
    """Convert GRAPH (.tflite, TOSA MLIR, .tosa or JSON) to a TOSA flatbuffer or its JSON form."""
    _commands().convert_cmd.convert(graph, out_path, use_cache=not no_cache, tosa_level=tosa_level)


cache_app = typer.Typer(no_args_is_help=True, help="The cache of converted .tflite models and compiled "
                        "programs (at most NPU_SIM_CACHE_MAX_BYTES, default 1 GiB; least recently used "
                        "evicted).")
app.add_typer(cache_app, name="cache")


@cache_app.command("info")
def cache_info_command() -> None:
    """Show where the cache is, its entries and its size against the limit."""
    _commands().cache_cmd.cache_info()


@cache_app.command("clear")
def cache_clear_command() -> None:
    """Remove every cached conversion and compiled program."""
    _commands().cache_cmd.cache_clear()


# --- design-space sweeps (npu_sim/sweep, issue 17) ----------------------------------------
@app.command("sweep")
def sweep_command(
    spec: str = typer.Argument(..., help="Sweep spec YAML: graph, hw, inputs, axes (dotted HwConfig "
                                         "field -> values), optional search."),
    out_dir: Path = typer.Option(..., "-o", "--out-dir",
                                 help="Where results.csv, pareto.png, report.html and the point cache go."),
    workers: int | None = typer.Option(None, "--workers", help="Worker processes (default: all cores)."),
    scheduler: str | None = typer.Option(None, "--scheduler", metavar="ADDRESS",
                                         help="Run the points on a dask.distributed cluster "
                                              "(tcp://HOST:PORT); needs the [dask] extra."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
    allow_unpredictable: bool = typer.Option(False, "--allow-unpredictable", help=ALLOW_UNPREDICTABLE_HELP),
) -> None:
    """Run GRAPH on every config of a design space; cycles, energy, area and the Pareto front."""
    _commands().sweep_cmd.sweep(spec, out_dir, workers, scheduler, progress=not no_progress,
                                allow_unpredictable=allow_unpredictable)


@app.command("report")
def report_command(
    run_dir: Path = typer.Argument(..., help="An output folder of npu-sim run."),
    out: Path | None = typer.Option(None, "-o", "--out", help="The HTML file (default RUN_DIR/report.html)."),
) -> None:
    """Write one run's page: a self-contained HTML file (figures, where the time goes, Gantt, operations,
    roofline, memory)."""
    _commands().report_cmd.report(run_dir, out)


@app.command("compare")
def compare_command(
    dir_a: Path = typer.Argument(..., help="An output folder of npu-sim run."),
    dir_b: Path = typer.Argument(..., help="Another one."),
    out: Path | None = typer.Option(None, "-o", "--out", help="The HTML file (default ./compare.html)."),
) -> None:
    """Print the figures of two runs side by side with B/A ratios; write a page comparing them."""
    _commands().report_cmd.compare(dir_a, dir_b, out)


#: What typer's own coercion (a pydantic TypeAdapter per parameter) would make of a value of
#: these annotations that :func:`_plain_value` takes as it is (an int: its decimal digits).
_DECIMAL = re.compile(r"0|-?[1-9][0-9]{0,17}")
_UNCHANGED = object()


def _plain_value(annotation: Any, value: Any) -> Any:
    """``value`` as typer coerces it to ``annotation``, for the plain cases: a str, int, float or
    bool already of its type, an int's digits, a list of strs; else :data:`_UNCHANGED`."""
    kind = type(value)
    if kind is annotation and kind in (str, int, float, bool):
        return value
    if annotation is int and kind is str and _DECIMAL.fullmatch(value):
        return int(value)
    if annotation == list[str] and kind in (list, tuple) and all(type(item) is str for item in value):
        return list(value)
    return _UNCHANGED


class _PlainParam:
    """A parameter's coercion that takes plain values as they are (:func:`_plain_value`) and
    leaves any other to typer's (built on first need): building a pydantic TypeAdapter for every
    option, and importing typer's adapters, took some 15 to 25 ms of each command's start."""

    def __init__(self, descriptor: Any, build: Any):
        self.descriptor, self.build = descriptor, build
        self.full: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:   # (as typer's RuntimeParam.coerce)
            return () if param.multiple or param.nargs == -1 else None
        plain = _plain_value(self.descriptor.annotation, value) if self.descriptor.file_annotation is None \
            else _UNCHANGED
        if plain is not _UNCHANGED:
            return plain
        if self.full is None:
            self.full = self.build(self.descriptor)
        return self.full.coerce(value, param=param, ctx=ctx)


def _plain_params() -> None:
    """Make typer coerce plain values without pydantic (:class:`_PlainParam`); nothing if this
    typer builds its parameters' coercion otherwise."""
    build = getattr(typer.core, "build_runtime_param", None)
    if build is not None and not getattr(build, "plain", False):
        def plain(descriptor: Any) -> _PlainParam:
            return _PlainParam(descriptor, build)

        plain.plain = True  # type: ignore[attr-defined]
        setattr(typer.core, "build_runtime_param", plain)   # noqa: B010 (typer declares another type)


_plain_params()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    _state["debug"] = "--debug" in args
    # TOSA allows control flow nested 256 deep (MAX_NESTING); executing and lowering it
    # takes a few Python frames per level
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    try:
        status = app(args=args, standalone_mode=False)
        if status == INTERRUPTED:   # typer turns Ctrl-C into this return value
            raise KeyboardInterrupt
    except NpuSimError as exc:
        if _state["debug"]:
            raise
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print("error: interrupted", file=sys.stderr)
        return INTERRUPTED
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
    """The console script. The cycle collector is paused until the command starts (typer's first
    dispatch imports pydantic: tens of thousands of objects for the process's lifetime, which
    collections would scan to find nothing), then resumes with them frozen (:func:`_commands`)."""
    if gc.isenabled():
        gc.disable()
        _state["collector_paused"] = True
    status = main()
    _exit_at_once(status)
    sys.exit(status)


def _exit_at_once(status: int) -> None:
    """End the process with ``status`` without tearing the interpreter down: freeing every module
    and object one by one (a run's Program, trace and the imported packages) took 20 to 50 ms
    after the work was done. What an exit must still do is done first: the atexit handlers run
    and the standard streams are flushed. Returns (for the ordinary exit) while a non-daemon
    thread still runs, or if a stream cannot be flushed (the ordinary exit reports it)."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(status)


if __name__ == "__main__":
    run()
