"""``.tflite`` models: converted to TOSA MLIR text by Arm's ``tosa-converter-for-tflite``
(the optional ``[tflite]`` extra), then read by :mod:`npu_sim.tosa.mlir_reader`.

Conversions are cached by the SHA-256 of the model bytes in the user's cache folder
(:mod:`npu_sim.conversion_cache`: bounded, least recently used evicted), so a sweep or a
second run over the same ``.tflite`` converts it once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from npu_sim import conversion_cache
from npu_sim.errors import TosaFormatError, UnsupportedFeatureError
from npu_sim.tosa.mlir_text import location_aliases
from npu_sim.tosa.tflite import row_update
from npu_sim.tosa.tflite.legalize import LEGALIZED

INSTALL_HINT = "pip install 'npu-sim[tflite]' (the tosa-converter-for-tflite package)"
#: Bytes of a Vela-compiled model's custom operator (the command stream for the Ethos-U)
_VELA_MARK = b"ethos-u"


def cache_dir() -> Path:
    """Where converted models are kept."""
    return conversion_cache.cache_dir()


#: What the cache keys also hash: the form the converter writes (its locations name each
#: operator's TFLite source operator, :mod:`scheduler.passes.source_operators`).
CONVERSION_FORMAT = b"\0text+locations"


def tflite_to_mlir(data: bytes, source: str, use_cache: bool = True) -> str:
    """The TOSA MLIR text of a ``.tflite`` model (from the cache when it was converted before)."""
    key = hashlib.sha256(data + CONVERSION_FORMAT).hexdigest()
    text = conversion_cache.lookup("tflite", key, "mlir") if use_cache else None
    if text is not None:
        if "func.func" in text:   # else a conversion that went wrong: do it again
            text = row_update.rewrite(text, source)
            _refuse_foreign_operators(text, data, source)
            return text
    try:
        text = _convert(data, source)
    except TosaFormatError:
        _refuse_vela_output(data, source)
        raise
    if use_cache:
        conversion_cache.store("tflite", key, "mlir", text)
    text = row_update.rewrite(text, source)   # (the cache keeps the converter's own text)
    _refuse_foreign_operators(text, data, source)
    return text


#: What to do about an operator the converter could not legalize.
FOREIGN_HINTS = {
    "tfl.bidirectional_sequence_lstm": "npu-sim legalizes the unidirectional fused LSTM: export the layer as "
                                       "Keras' Bidirectional does by default (two sequence LSTMs and a REVERSE)",
    "tfl.custom": "a CUSTOM TFLite operator has no TOSA form",
}
#: Operators the converter leaves beside others (placeholders), never the cause.
_PLACEHOLDERS = {"tfl.no_value", "tfl.pseudo_const", "tfl.pseudo_qconst"}


def _refuse_foreign_operators(text: str, data: bytes, source: str) -> None:
    """Refuse a conversion that left TFLite operators in the graph, naming the one to fix."""
    # (a location may be named after an operator: loc("tfl.slice"); so may an alias's)
    named = location_aliases(_lines_naming("tfl.", text))[0]
    found = [op for op in dict.fromkeys(re.findall(r'"?(tfl\.[a-z_0-9]+)"?\(|= "?(tfl\.[a-z_0-9]+)', named))]
    names = [a or b for a, b in found if (a or b) not in _PLACEHOLDERS and (a or b) not in LEGALIZED]
    if not names and "ui8" in location_aliases(_lines_naming("ui8", text))[0]:
        _refuse_vela_output(data, source)
    if not names:
        return
    _refuse_vela_output(data, source)
    known = [n for n in names if n in FOREIGN_HINTS]
    name = known[0] if known else names[0]
    hint = FOREIGN_HINTS.get(name, "the TFLite-to-TOSA converter cannot legalize it")
    raise UnsupportedFeatureError(f"{source}: operator {name.removeprefix('tfl.').upper()} ({name}): {hint}")


def _lines_naming(word: str, text: str) -> str:
    """The lines of ``text`` holding ``word``, in order (the searches above match within a line:
    only these few lines of a converted model's megabytes need them)."""
    lines: list[str] = []
    at = text.find(word)
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        lines.append(text[start:end])
        at = text.find(word, end)
    return "\n".join(lines)


def _refuse_vela_output(data: bytes, source: str) -> None:
    if _VELA_MARK in data:
        raise UnsupportedFeatureError(f"{source}: a .tflite already compiled by Vela (its ethos-u custom "
                                      "operator holds a command stream): give npu-sim the .tflite from "
                                      "before Vela compiled it")


#: The converter's module (C++ underneath: a damaged flatbuffer can crash it, so it runs in a
#: process of its own, :func:`_convert`).
CONVERTER = "tosa_converter_for_tflite"
#: What that process runs: the model's path and the text's path as arguments; a refusal is one
#: line on stdout and exit code 3 (the converter's own C++ logs go to stderr: the first of its
#: MLIR diagnostics, ``loc(...): error: ...``, names the layer and operation it failed on).
_CONVERT_SCRIPT = """
import sys
import tosa_converter_for_tflite as c
try:
    with open(sys.argv[2], "wb") as sink:
        c.tflite_flatbuffer_to_tosa_mlir(sys.argv[1], sink, c.TosaConverterOutputFormat.Text,
                                         c.TosaConverterDebugInfo.Enable)
except Exception as exc:
    print(" ".join(str(exc).split())[:300] or type(exc).__name__)
    sys.exit(3)
"""
#: Seconds a conversion may take (ResNet-50 takes about two).
CONVERT_TIMEOUT_S = 600


def _converter_available() -> bool:
    """True if the converter can be imported (without importing it here)."""
    if CONVERTER in sys.modules:
        return sys.modules[CONVERTER] is not None
    return importlib.util.find_spec(CONVERTER) is not None


def _convert(data: bytes, source: str) -> str:
    """The converter's MLIR text for ``data``, converted in a process of its own: whatever the
    bytes do to the converter (an exception, a crash, no end), the caller gets one line."""
    if not _converter_available():
        raise UnsupportedFeatureError(f"{source}: reading .tflite needs the converter: {INSTALL_HINT}")
    damaged = "a truncated or damaged .tflite?"
    with tempfile.TemporaryDirectory(prefix="npu-sim-tflite-") as work:
        model, out = Path(work) / "model.tflite", Path(work) / "model.mlir"
        model.write_bytes(data)
        try:
            done = subprocess.run([sys.executable, "-c", _CONVERT_SCRIPT, str(model), str(out)],
                                  capture_output=True, timeout=CONVERT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise TosaFormatError(f"{source}: the TFLite converter did not finish in {CONVERT_TIMEOUT_S} s "
                                  f"({damaged})") from None
        if done.returncode != 0:
            reason = " ".join(done.stdout.decode("utf-8", errors="replace").split())[:300]
            error = first_converter_error(done.stderr.decode("utf-8", errors="replace"), str(model),
                                          Path(source).name)
            if done.returncode < 0:
                reason = f"it crashed on signal {-done.returncode}"
            elif not reason:
                reason = f"it stopped with exit status {done.returncode}"
            elif "legalize" in reason.lower():   # a valid model with an operation it has no TOSA form for
                raise UnsupportedFeatureError(f"{source}: the TFLite converter cannot legalize it: {error or reason}")
            if error:
                reason = f"{reason} {error}"
            raise TosaFormatError(f"{source}: the TFLite converter cannot read it ({reason}; {damaged})")
        sink = out.read_bytes() if out.exists() else b""
    # (the file locations name the temporary copy: the same model converts to the same text)
    text = sink.decode("utf-8", errors="replace").replace(str(model), "model.tflite")
    if "func.func" not in text:
        raise TosaFormatError(f"{source}: the TFLite converter found no model in it (a truncated or damaged .tflite?)")
    return text


#: Characters of the converter's error quoted in a refusal (it stays one line).
ERROR_QUOTE_CHARS = 300
#: The file part of an MLIR location naming a layer: ``loc("layer"("file.tflite":0:0))``.
_FILE_IN_LOCATION = re.compile(r'(loc\("[^"]*")\("[^"]*":\d+:\d+\)\)')


def first_converter_error(stderr: str, model_path: str, shown_as: str) -> str:
    """The converter's first MLIR error diagnostic in ``stderr`` as one bounded line (``""`` if
    none): ``loc("layer"): error: ...``, the converted copy at ``model_path`` named ``shown_as``."""
    for line in stderr.splitlines():
        if "error: " not in line:
            continue
        line = _FILE_IN_LOCATION.sub(r"\1)", line.replace(model_path, shown_as))
        line = " ".join(line.split())
        return line if len(line) <= ERROR_QUOTE_CHARS else line[:ERROR_QUOTE_CHARS - 3] + "..."
    return ""
