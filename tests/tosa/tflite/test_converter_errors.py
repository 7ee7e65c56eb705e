"""When Arm's converter cannot legalize a valid model, the one-line refusal quotes its first
error (the layer and the operation), and does not call the file damaged; a damaged file is still
called so, with the converter's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from npu_sim.cli import main
from npu_sim.tosa.tflite_import import ERROR_QUOTE_CHARS, first_converter_error

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite"


def _refusal(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("command", [["inspect"], ["run", "--hw", "edge", "--random-inputs", "0", "-o", "out"]])
def test_a_model_the_converter_cannot_legalize_is_refused_with_its_error(tmp_path, capsys, command):
    model = tmp_path / "softsign.tflite"   # int8 softsign: the converter's int8 ABS fails to verify
    model.write_bytes((DATA / "softsign_int8.tflite").read_bytes())
    code, err = _refusal([command[0], model, *command[1:]], capsys)
    assert code == 2 and len(err) == 1, err
    assert f"{model}: the TFLite converter cannot legalize it: " in err[0]
    assert 'loc("model_2/activation/Softsign1"): error: \'tosa.abs\' op requires the same element type' in err[0]
    assert "damaged" not in err[0] and "npu-sim-tflite-" not in err[0]   # (nor the converted copy's path)


def test_a_damaged_model_is_still_called_so_with_the_converters_error(tmp_path, capsys):
    model = tmp_path / "cut.tflite"
    model.write_bytes((DATA / "dense_int8.tflite").read_bytes()[:2000])
    code, err = _refusal(["inspect", model], capsys)
    assert code == 2 and len(err) == 1, err
    assert "cannot read it" in err[0] and "truncated or damaged" in err[0]
    assert 'loc("cut.tflite":0:0): error: couldn\'t parse flatbuffer' in err[0]


def test_the_first_error_is_quoted_in_one_bounded_line():
    stderr = ("WARNING: a log line\nE0000 absl: the model is odd\n"
              'loc("net/layer"("/tmp/x/model.tflite":0:0)): error: \'tosa.abs\'   op fails\n'
              'loc("net/other"("/tmp/x/model.tflite":0:0)): error: a second one\n')
    assert first_converter_error(stderr, "/tmp/x/model.tflite", "m.tflite") == \
        'loc("net/layer"): error: \'tosa.abs\' op fails'
    assert first_converter_error('loc("/tmp/x/model.tflite":0:0): error: bad', "/tmp/x/model.tflite",
                                 "m.tflite") == 'loc("m.tflite":0:0): error: bad'
    long = first_converter_error("error: " + "x" * 1000, "/tmp/x/model.tflite", "m.tflite")
    assert len(long) == ERROR_QUOTE_CHARS and long.endswith("...")
    assert first_converter_error("WARNING: nothing wrong\n", "/tmp/x/model.tflite", "m.tflite") == ""
