"""tosa-tools as the outside reference for the graph I/O tests.

Independent writers and readers of TOSA files: the deprecated Python
``serializer.tosa_serializer`` and the compiled ``tosa_serializer``, ``tosa-opt``
(MLIR text <-> flatbuffer), ``flatc`` with tosa-tools' ``tosa.fbs``, and the
reference model. Nothing here uses npu-sim's reader or writer.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import numpy as np
import tosa_reference_model

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from serializer import tosa_serializer as pyser  # the pure-Python serializer

_SITE = Path(importlib.util.find_spec("tosa_serializer").submodule_search_locations[0]).parent
TOSA_BIN = _SITE / "bin"
TOSA_FBS = TOSA_BIN / "tosa.fbs"
TOSA_OPT = TOSA_BIN / "tosa-opt"
#: tosa-tools installs flatc into the virtualenv's bin/ (next to python)
FLATC = next(p for p in [_SITE.parents[2] / "bin" / "flatc", TOSA_BIN / "flatc",
                         Path(shutil.which("flatc") or "/nonexistent")] if p.exists())

PY_DTYPE = pyser.DType
PY_OP = pyser.TosaOp.Op()


def python_serializer(version: tuple[int, int, int, bool] | None = None) -> pyser.TosaSerializer:
    """A fresh Python-serializer graph (default version: the library's 1.1.0 draft)."""
    kwargs = {}
    if version is not None:
        kwargs = dict(tosa_version_major=version[0], tosa_version_minor=version[1],
                      tosa_version_patch=version[2], tosa_version_draft=version[3])
    return pyser.TosaSerializer(tempfile.gettempdir(), **kwargs)


def py_attribute(method: str, *args) -> pyser.TosaSerializerAttribute:
    attr = pyser.TosaSerializerAttribute()
    getattr(attr, method)(*args)
    return attr


def tosa_opt_serialize(mlir: str) -> bytes:
    """``tosa-opt --tosa-serialize`` of MLIR text: the flatbuffer it writes."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.mlir", Path(tmp) / "out.tosa"
        src.write_text(mlir)
        subprocess.run([str(TOSA_OPT), f"--tosa-serialize=tosa-flatbuffer-filename={out}",
                        str(src), "-o", "/dev/null"], check=True, capture_output=True)
        return out.read_bytes()


def tosa_opt_serialize_json(mlir: str) -> str:
    """``tosa-opt --tosa-serialize-json``: the JSON form tosa-tools writes."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.mlir", Path(tmp) / "out.json"
        src.write_text(mlir)
        subprocess.run([str(TOSA_OPT), "--tosa-serialize-json=tosa-flatbuffer-filename="
                        f"{out} tosa-flatbuffer-schema={TOSA_FBS}", str(src), "-o", "/dev/null"],
                       check=True, capture_output=True)
        return out.read_text()


def tosa_opt_deserialize(binary: bytes) -> str:
    """``tosa-opt --tosa-deserialize``: the MLIR text tosa-tools reads from a flatbuffer."""
    with tempfile.TemporaryDirectory() as tmp:
        src, empty = Path(tmp) / "g.tosa", Path(tmp) / "empty.mlir"
        src.write_bytes(binary)
        empty.write_text("")
        done = subprocess.run([str(TOSA_OPT), f"--tosa-deserialize=tosa-flatbuffer-filename={src}",
                               str(empty)], check=True, capture_output=True, text=True)
        return done.stdout


def flatc_json(binary: bytes) -> str:
    """``flatc --json --strict-json`` of a flatbuffer with tosa-tools' schema."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "g.tosa"
        src.write_bytes(binary)
        subprocess.run([str(FLATC), "--json", "--strict-json", "--raw-binary", "-o", tmp,
                        str(TOSA_FBS), "--", str(src)], check=True, capture_output=True)
        return (Path(tmp) / "g.json").read_text()


def flatc_binary(json_text: str) -> bytes:
    """``flatc -b``: the flatbuffer flatc builds from a JSON graph."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "g.json"
        src.write_text(json_text)
        subprocess.run([str(FLATC), "-b", "-o", tmp, str(TOSA_FBS), str(src)], check=True,
                       capture_output=True)
        return (Path(tmp) / "g.tosa").read_bytes()


def compiled_serializer_reads(binary: bytes) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """What tosa-tools' C++ serialization library reads: [(region, [(block, ops)])]."""
    import tosa_serializer as cts

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.tosa"
        path.write_bytes(binary)
        ser = cts.TosaSerializer("", cts.ConstMode.EMBED)
        assert ser.loadTosaFlatbuffer(str(path))
        return [(r.name, [(b.name, [o.op.name for o in b.operators]) for b in r.basicBlocks])
                for r in ser.regions]


def run_reference(binary: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Outputs of the reference model; fails the test unless the graph is TOSA_VALID.

    Only for graphs known to be valid: the model aborts the process on some errors.
    """
    outputs, status = tosa_reference_model.run(binary, list(inputs))
    assert status == tosa_reference_model.GraphStatus.TOSA_VALID, status
    return [np.asarray(o) for o in outputs]
