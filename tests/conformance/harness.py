"""Run tosa-tools' generated per-operator conformance tests through npu-sim.

A test directory (from ``tosa_verif_build_tests`` or
``tosa_verif_conformance_generator``) holds ``desc.json``, ``test.tosa`` and
the input ``.npy`` files; the expected result is not shipped: the conformance
flow runs Arm's reference model (in precise mode, which also writes the
bounds files the floating-point compliance modes need), then judges the
implementation's result with ``tosa_verify``.

We do the same: :func:`reference_result` runs the reference model once per
test (cached next to the test unless large), :func:`run_case` reads the .tosa with *our*
reader, runs *our* executor on the test's inputs and compares: integer and
boolean outputs bit for bit, floating-point outputs with ``tosa_verify``
against the compliance mode the test declares (and integer outputs too when
their mode allows a tolerance, e.g. RESCALE_INEXACT).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tosa_reference_model

from npu_sim.errors import NpuSimError, UnsupportedFeatureError
from npu_sim.reference.session import execute
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.flatbuffer_io import read_graph
from npu_sim.tosa.profiles import required_profiles

BIN = Path(sys.executable).parent
TOOLS = Path(tosa_reference_model.__file__).resolve().parents[1]
REF_MODEL = TOOLS / "bin" / "tosa_reference_model"
TOSA_VERIFY = TOOLS / "bin" / "tosa_verify"
SCHEMA = TOOLS / "bin" / "tosa.fbs"
FLATC = TOOLS / "bin" / "flatc"
GENERATE_LIB = TOOLS / "tosa_reference_model" / "libtosa_reference_generate_lib.so"
TOOLS_VERSION = "tosa-tools-2026.8.0"

#: TOSA 1.0 extensions the generators may use (the 1.1-draft ones are left out).
EXTENSIONS_1_0 = ["tosa-ext-int16", "tosa-ext-int4", "tosa-ext-bf16", "tosa-ext-fp8e4m3",
                  "tosa-ext-fp8e5m2", "tosa-ext-fft", "tosa-ext-variable",
                  "tosa-ext-controlflow", "tosa-ext-doubleround", "tosa-ext-inexactround"]

#: Operator groups of the specification (tosa.xml, v1.0.1): the report's families.
FAMILIES: dict[str, list[str]] = {
    "tensor": ["ARGMAX", "AVG_POOL2D", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "FFT2D", "MATMUL",
               "MAX_POOL2D", "RFFT2D", "TRANSPOSE_CONV2D"],
    "activation": ["CLAMP", "ERF", "SIGMOID", "TANH"],
    "elementwise-binary": ["ADD", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR",
                           "BITWISE_XOR", "INTDIV", "LOGICAL_AND", "LOGICAL_LEFT_SHIFT",
                           "LOGICAL_RIGHT_SHIFT", "LOGICAL_OR", "LOGICAL_XOR", "MAXIMUM",
                           "MINIMUM", "MUL", "POW", "SUB", "TABLE"],
    "elementwise-unary": ["ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP", "FLOOR", "LOG",
                          "LOGICAL_NOT", "NEGATE", "RECIPROCAL", "RSQRT", "SIN"],
    "elementwise-ternary": ["SELECT"],
    "comparison": ["EQUAL", "GREATER", "GREATER_EQUAL"],
    "reduction": ["REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT",
                  "REDUCE_SUM"],
    "data-layout": ["CONCAT", "PAD", "RESHAPE", "REVERSE", "SLICE", "TILE", "TRANSPOSE"],
    "scatter-gather": ["GATHER", "SCATTER"],
    "image": ["RESIZE"],
    "type-conversion": ["CAST", "RESCALE"],
    "data-node": ["CONST", "IDENTITY"],
    "control-flow": ["COND_IF", "WHILE_LOOP"],
    "variable": ["VARIABLE", "VARIABLE_WRITE", "VARIABLE_READ"],
}
FAMILY_OF = {op: family for family, ops in FAMILIES.items() for op in ops}
OPERATORS = [op for ops in FAMILIES.values() for op in ops if op not in
             ("VARIABLE", "VARIABLE_WRITE", "VARIABLE_READ")]  # no generator tests for these

#: build_tests' operator names for each TOSA operator (a regex alternative each)
#: (the generator matches the filter before expanding "conv2d_TEMPLATE" into conv2d_3x3...)
GENERATOR_NAMES = {"COND_IF": "cond_if.*", "CONV2D": "conv2d.*", "CONV3D": "conv3d.*",
                   "DEPTHWISE_CONV2D": "depthwise_conv2d.*",
                   "TRANSPOSE_CONV2D": "transpose_conv2d.*"}


# --- tests on disk ------------------------------------------------------------------
@dataclass
class ConformanceCase:
    """One generated test directory."""

    path: Path
    desc: dict

    @classmethod
    def load(cls, path: Path) -> ConformanceCase:
        return cls(path, json.loads((path / "desc.json").read_text()))

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def operator(self) -> str:
        details = self.desc.get("test_details", {})
        if "operator" in details:
            return str(details["operator"]).upper()
        match = max((op for op in FAMILY_OF if self.name.upper().startswith(op)), key=len, default="?")
        return match

    @property
    def family(self) -> str:
        return FAMILY_OF.get(self.operator, "other")

    @property
    def expected_failure(self) -> bool:
        return bool(self.desc.get("expected_failure", False))

    def compliance_mode(self, ofm_name: str) -> str | None:
        tensors = self.desc.get("meta", {}).get("compliance", {}).get("tensors", {})
        return tensors.get(ofm_name, {}).get("mode")


def find_cases(root: Path, *, negative: bool = False) -> list[ConformanceCase]:
    """Every positive test under ``root`` (directories holding a desc.json), sorted; with
    ``negative``, every test that expects an ERROR_IF failure instead."""
    cases = [ConformanceCase.load(d.parent) for d in sorted(root.rglob("desc.json"))]
    return [c for c in cases if (c.expected_failure or "_ERRORIF_" in c.name) == negative]


def refusal(case: ConformanceCase) -> str:
    """How npu-sim treats a test that must fail: ``"refused: <error type>"`` when loading
    (as the CLI does, at TOSA level 8K) or executing it raises an :class:`NpuSimError`,
    ``"accepted"`` when it runs (a silently wrong answer), ``"crash: ..."`` for any other
    exception (a bug)."""
    from npu_sim.tosa.loader import load_graph

    try:
        graph = load_graph(case.path / case.desc["tosa_file"])
        inputs = {}
        for name, file in zip(case.desc["ifm_name"], case.desc["ifm_file"]):
            t = graph.input_types.get(name)
            array = np.load(case.path / file)
            inputs[name] = _as_storage(array, t.dtype).reshape(t.shape) if t is not None else array
        execute(graph, inputs)
    except NpuSimError as exc:
        return f"refused: {type(exc).__name__}"
    except Exception as exc:
        return f"crash: {type(exc).__name__}: {exc}"[:300]
    return "accepted"


# --- generating tests ------------------------------------------------------------------
def _generator_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{TOOLS / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _selection_config(path: Path, permutes: list[str], maximum: int) -> Path:
    names = {op.lower() for op in OPERATORS} | {"conv2d", "conv3d", "depthwise_conv2d",
                                                "transpose_conv2d", "cond_if_const", "cond_if_binary"}
    config = {n: {"selection": {"sample": {"permutes": permutes, "maximum": maximum}}} for n in names}
    path.write_text(json.dumps(config))
    return path


def _filter(operators: list[str]) -> str:
    return "^(" + "|".join(GENERATOR_NAMES.get(op, op.lower()) for op in operators) + ")$"


def generate_sample(out_dir: Path) -> None:
    """A small representative sample: about one test per operator and data type.

    Three ``tosa_verif_build_tests`` runs in parallel: every operator with small
    tensors; floating-point dot-product operators, and FFTs, with tensors large
    enough for their compliance checks (the generator skips tiny ones).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    common = [str(BIN / "tosa_verif_build_tests"), "--tosa-version", "1.0", "--test-type", "positive",
              "--no-special-tests", "--generate-lib-path", str(GENERATE_LIB),
              "--test-selection-criteria", "sample", "--profile", "tosa-pro-int", "tosa-pro-fp",
              "--extension", *EXTENSIONS_1_0]
    small = common + ["-o", str(out_dir / "all"), "--tensor-dim-range", "1,6", "--test-selection-config",
                      str(_selection_config(out_dir / "select_types.json", ["type"], 1)),
                      "--filter", _filter(OPERATORS)]
    dot_ops = ["CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "MATMUL", "AVG_POOL2D"]
    large_fp = common + ["-o", str(out_dir / "fp_dot"), "--tensor-dim-range", "8,16",
                         "--target-dtype", "fp32", "fp16", "bf16", "--test-selection-config",
                         str(_selection_config(out_dir / "select_one.json", [], 1)),
                         "--filter", _filter(dot_ops)]
    fft = common + ["-o", str(out_dir / "fft"), "--tensor-dim-range", "32,64",
                    "--test-selection-config", str(out_dir / "select_one.json"),
                    "--filter", _filter(["FFT2D", "RFFT2D"])]
    commands = (small, large_fp, fft)
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_generator_env()) for cmd in commands]
    for proc, cmd in zip(procs, commands):
        out, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {err[-2000:]}")


def generate_negative_sample(out_dir: Path) -> None:
    """One ERROR_IF test per operator and ERROR_IF condition the generator knows (small tensors)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [str(BIN / "tosa_verif_build_tests"), "--tosa-version", "1.0", "--test-type", "negative",
           "--no-special-tests", "--generate-lib-path", str(GENERATE_LIB),
           "--test-selection-criteria", "sample", "--profile", "tosa-pro-int", "tosa-pro-fp",
           "--extension", *EXTENSIONS_1_0, "-o", str(out_dir / "all"), "--tensor-dim-range", "1,6",
           "--test-selection-config", str(_selection_config(out_dir / "select_one.json", [], 1)),
           "--filter", _filter(OPERATORS)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_generator_env(), timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def generate_full(out_dir: Path, jobs: int = 2) -> None:
    """The official selection: ``tosa_verif_conformance_generator`` for TOSA 1.0.2."""
    build_dir = out_dir.with_name(out_dir.name + "_build")
    cmd = [str(BIN / "tosa_verif_conformance_generator"), "--tosa-version", "1.0.2",
           "--test-type", "positive", "--output-type", "binary", "--extension", *EXTENSIONS_1_0,
           "--ref-model-path", str(REF_MODEL), "--generate-lib-path", str(GENERATE_LIB),
           "--schema-path", str(SCHEMA), "--flatc-path", str(FLATC),
           "--output-directory", str(out_dir), "--build-directory", str(build_dir), "-j", str(jobs)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_generator_env(), cwd=str(out_dir.parent))
    if proc.returncode != 0:
        raise RuntimeError(f"conformance generator failed ({proc.returncode}): {proc.stderr[-3000:]}")
    shutil.rmtree(build_dir, ignore_errors=True)


#: Bump when the way tests are generated changes, so caches are regenerated.
RECIPE_VERSION = "2"


def cached_tests(cache_root: Path, kind: str, generate) -> Path:
    """``cache_root/kind`` holding generated tests, generating them once.

    The cache is stamped with the tools version and :data:`RECIPE_VERSION`.
    """
    target = cache_root / kind
    stamp = target / ".complete"
    key = f"{TOOLS_VERSION} recipe {RECIPE_VERSION}"
    if stamp.exists() and stamp.read_text() == key:
        return target
    shutil.rmtree(target, ignore_errors=True)
    partial = cache_root / f"{kind}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    generate(partial)
    partial.rename(target)
    stamp.write_text(key)
    return target


# --- reference results -------------------------------------------------------------------
def _ref_dir(case: ConformanceCase) -> Path:
    return case.path / "npu_sim_ref"


def reference_result(case: ConformanceCase) -> str | None:
    """Run the reference model (precise mode) for ``case`` once; None if OK, else why not."""
    out = _ref_dir(case)
    done = out / ".status"
    if done.exists():
        status = done.read_text()
        return None if status == "ok" else status
    out.mkdir(exist_ok=True)
    cmd = [str(REF_MODEL), "--test_desc", str(case.path / "desc.json"), "--output_dir", str(out),
           "--precise_mode", "1"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        ok = proc.returncode == 0 and all((out / f).exists() for f in case.desc["ofm_file"])
        status = "ok" if ok else f"reference model exit {proc.returncode}: " + " ".join(
            (proc.stderr or proc.stdout).split())[-300:]
    except subprocess.TimeoutExpired:
        return "reference model timed out"  # not cached: the machine may just be busy
    done.write_text(status)
    return None if status == "ok" else status


#: Reference results bigger than this are deleted once judged (the large convolution
#: tests' fp64 and bounds files add up to tens of GB); smaller ones stay cached.
KEEP_REFERENCE_BYTES = 2 << 20


def _forget_large_reference(case: ConformanceCase) -> None:
    out = _ref_dir(case)
    if sum(f.stat().st_size for f in out.iterdir() if f.is_file()) > KEEP_REFERENCE_BYTES:
        shutil.rmtree(out, ignore_errors=True)  # recomputed on the next run


# --- running ours and judging ---------------------------------------------------------------
@dataclass
class Outcome:
    """The verdict on one test: pass, fail (wrong or refused), error (crash: a bug), or skip
    (no reference result, or a failure on types outside TOSA 1.0 that the generator adds)."""

    case: str
    operator: str
    family: str
    status: str
    detail: str = ""
    seconds: float = 0.0


def _as_storage(array: np.ndarray, dtype: DType) -> np.ndarray:
    storage = dtype.numpy_dtype
    if array.dtype == storage:
        return array
    if array.dtype.kind in "Vu" and array.dtype.itemsize == storage.itemsize:
        return array.view(storage)
    return array.astype(storage)


def _verify_fp(case: ConformanceCase, ofm_name: str, ours: np.ndarray, work: Path) -> str | None:
    """tosa_verify our ``ours`` for output ``ofm_name`` (its compliance mode); None if compliant."""
    index = case.desc["ofm_name"].index(ofm_name)
    ref_file = _ref_dir(case) / case.desc["ofm_file"][index]
    imp_file = work / f"imp-{index}.npy"
    # The reference tools keep fp8e5m2 as uint8 bit patterns (other ml_dtypes types as raw records).
    np.save(imp_file, ours.view(np.uint8) if ours.dtype == DType.FP8E5M2.numpy_dtype else ours)
    cmd = [str(TOSA_VERIFY), "--test_desc", str(case.path / "desc.json"), "--ofm_name", ofm_name,
           "--imp_result_file", str(imp_file), "--ref_result_file", str(ref_file)]
    bounds = ref_file.with_name("bounds_" + ref_file.name)
    if bounds.exists():
        cmd += ["--bnd_result_file", str(bounds)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode == 0:
        return None
    text = " ".join((proc.stdout + " " + proc.stderr).split())
    return f"tosa_verify: {text[-300:]}"


def _compare(case: ConformanceCase, graph, outputs: dict[str, np.ndarray], work: Path) -> str | None:
    """None if every output matches the reference, else what differs."""
    for index, ofm in enumerate(case.desc["ofm_name"]):
        if ofm not in outputs:
            return f"output {ofm!r} missing (graph outputs: {list(outputs)})"
        ours = outputs[ofm]
        out_type = graph.output_types[ofm]
        mode = case.compliance_mode(ofm)
        # Floating point, and integer modes with a tolerance (RESCALE_INEXACT), go to tosa_verify.
        if out_type.dtype.is_float or mode not in (None, "EXACT"):
            problem = _verify_fp(case, ofm, ours, work)
            if problem:
                return f"{ofm}: {problem}"
            continue
        ref = _as_storage(np.load(_ref_dir(case) / case.desc["ofm_file"][index]), out_type.dtype)
        if ref.shape != ours.shape and ref.size == ours.size:
            ref = ref.reshape(ours.shape)
        if ref.shape != ours.shape:
            return f"{ofm}: shape {list(ours.shape)}, reference {list(ref.shape)}"
        if not np.array_equal(ours, ref):
            bad = np.argwhere(ours != ref)
            first = tuple(int(i) for i in bad[0])
            return (f"{ofm}: {len(bad)} of {ref.size} values differ, first at {list(first)}: "
                    f"ours {ours[first]!r}, reference {ref[first]!r}")
    return None


def _beyond_tosa_1_0(case: ConformanceCase) -> str:
    """What in the test's graph no TOSA 1.0 typesupport row covers ('' if nothing)."""
    try:
        report = required_profiles(read_graph((case.path / case.desc["tosa_file"]).read_bytes()))
    except Exception:  # unreadable: judged as it stands
        return ""
    return "; ".join([*report.draft_operators, *report.unsupported])


def run_case(case: ConformanceCase, ref_status: str | None) -> Outcome:
    """Read, execute and judge one test (after :func:`reference_result`)."""
    outcome = Outcome(case.name, case.operator, case.family, "pass")
    if ref_status is not None:
        outcome.status, outcome.detail = "skip", ref_status
        return outcome
    start = time.perf_counter()
    try:
        graph = read_graph((case.path / case.desc["tosa_file"]).read_bytes())
        inputs = {}
        for name, file in zip(case.desc["ifm_name"], case.desc["ifm_file"]):
            t = graph.input_types[name]
            inputs[name] = _as_storage(np.load(case.path / file), t.dtype).reshape(t.shape)
        outputs = execute(graph, inputs)
        with tempfile.TemporaryDirectory() as tmp:
            problem = _compare(case, graph, outputs, Path(tmp))
        if problem:
            outcome.status, outcome.detail = "fail", problem
    except UnsupportedFeatureError as exc:
        outcome.status, outcome.detail = "fail", f"unsupported: {exc}"
    except NpuSimError as exc:
        outcome.status, outcome.detail = "fail", f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # a crash (KernelBugError included) is a bug in npu-sim
        outcome.status, outcome.detail = "error", f"{type(exc).__name__}: {exc}"
    if outcome.status != "pass":
        beyond = _beyond_tosa_1_0(case)
        if beyond:  # the generator also makes tests of 1.1-draft type combinations
            outcome.status, outcome.detail = "skip", f"outside TOSA 1.0 ({beyond}); {outcome.detail}"
    outcome.seconds = time.perf_counter() - start
    outcome.detail = " ".join(outcome.detail.split())[:400]
    return outcome


def npu_verdict(case: ConformanceCase, preset: str) -> str:
    """The test graph on the simulated NPU against the executor: ``"same"`` (identical bits),
    ``"skip"`` (the executor refuses it: judged by :func:`run_case`), ``"too big: ..."`` (a
    ScheduleError: a tile or the graph does not fit the preset's TCM or DDR), else what went
    wrong (``"differs: ..."``, an error or a crash)."""
    import npu_sim
    from npu_sim.errors import ScheduleError

    graph = read_graph((case.path / case.desc["tosa_file"]).read_bytes())
    try:
        inputs = {n: _as_storage(np.load(case.path / f), graph.input_types[n].dtype).reshape(
            graph.input_types[n].shape) for n, f in zip(case.desc["ifm_name"], case.desc["ifm_file"])}
        expected = execute(graph, inputs)
    except Exception:
        return "skip"
    try:
        outputs = npu_sim.simulate(graph, preset, inputs).outputs
    except ScheduleError as exc:
        return f"too big: {exc}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:400]
    for name, want in expected.items():
        if np.ascontiguousarray(outputs[name]).tobytes() != np.ascontiguousarray(want).tobytes():
            return f"differs: output {name}"
    return "same"


def judge(case: ConformanceCase) -> Outcome:
    """Reference result (cached when small), then ours, then the verdict."""
    outcome = run_case(case, reference_result(case))
    if _ref_dir(case).exists():
        _forget_large_reference(case)
    return outcome


def run_cases(cases: list[ConformanceCase], jobs: int = 2, log: Path | None = None) -> list[Outcome]:
    """Judge every case, ``jobs`` at a time; outcomes in the order of ``cases``.

    With ``log``, each outcome is appended to it as a JSON line as soon as known
    (``tail -f`` it to follow a long run).
    """
    lock = threading.Lock()
    with open(log, "w") if log else open(os.devnull, "w") as stream:
        def judge_and_log(case: ConformanceCase) -> Outcome:
            outcome = judge(case)
            with lock:
                stream.write(json.dumps(dataclasses.asdict(outcome)) + "\n")
                stream.flush()
            return outcome

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(judge_and_log, cases))


# --- the report -----------------------------------------------------------------------------
def summarize(outcomes: list[Outcome]) -> dict[str, Counter]:
    per_op: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        per_op[o.operator][o.status] += 1
    return per_op


def write_report(outcomes: list[Outcome], path: Path, title: str, source: str) -> str:
    """A markdown table: per family and operator, pass / fail / error / skip, first problem."""
    per_op = summarize(outcomes)
    first_problem: dict[str, str] = {}
    for o in outcomes:
        if o.status in ("fail", "error") and o.operator not in first_problem:
            first_problem[o.operator] = f"`{o.case}`: {o.detail}"
    for o in outcomes:  # no failure: say why tests were skipped
        if o.status == "skip" and o.operator not in first_problem:
            first_problem[o.operator] = f"(skipped) `{o.case}`: {o.detail}"
    total = Counter()
    for counts in per_op.values():
        total.update(counts)
    lines = [f"# {title}", "",
             f"Tests: {source}. Reference: Arm's TOSA reference model ({TOOLS_VERSION}), "
             "integers bit-exact, floating point judged by `tosa_verify`.", "",
             f"**Total: {total['pass']} pass, {total['fail']} fail, {total['error']} error, "
             f"{total['skip']} skipped, of {sum(total.values())} tests.**", "",
             "## By family", "", "| family | pass | fail | error | skip |", "|---|---:|---:|---:|---:|"]
    families: dict[str, Counter] = defaultdict(Counter)
    for op, counts in per_op.items():
        families[FAMILY_OF.get(op, "other")].update(counts)
    for family in [*FAMILIES, "other"]:
        if family in families:
            c = families[family]
            lines.append(f"| {family} | {c['pass']} | {c['fail']} | {c['error']} | {c['skip']} |")
    lines += ["", "## By operator", "",
              "| family | operator | pass | fail | error | skip | first problem (or skip reason) |",
              "|---|---|---:|---:|---:|---:|---|"]
    for op in sorted(per_op, key=lambda o: ([*FAMILIES, "other"].index(FAMILY_OF.get(o, "other")), o)):
        c = per_op[op]
        problem = first_problem.get(op, "").replace("|", "\\|")
        lines.append(f"| {FAMILY_OF.get(op, 'other')} | {op} | {c['pass']} | {c['fail']} | "
                     f"{c['error']} | {c['skip']} | {problem} |")
    missing = [op for op in OPERATORS if op not in per_op]
    if missing:
        lines += ["", f"No generated tests for: {', '.join(missing)}."]
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def outcome_line(o: Outcome) -> str:
    return f"{o.case}: {o.status} {o.detail}"


__all__ = ["ConformanceCase", "Outcome", "find_cases", "generate_sample", "generate_full",
           "cached_tests", "run_cases", "run_case", "reference_result", "judge", "write_report",
           "OPERATORS", "FAMILIES"]
