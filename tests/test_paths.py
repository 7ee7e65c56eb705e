"""npu_sim.paths: output directories and files get the permissions of the user's umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from npu_sim.cli import main
from npu_sim.paths import current_umask, follow_umask, staged_output

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "add_mul_fp32.tosa"


@pytest.fixture(params=[0o022, 0o027, 0o002])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_umask_is_read_back(umask: int) -> None:
    assert current_umask() == umask


def test_follow_umask_gives_what_a_new_file_or_directory_would_get(tmp_path: Path, umask: int) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    os.chmod(tmp_path / "f", 0o600)
    os.chmod(tmp_path / "d", 0o700)
    follow_umask(tmp_path / "f")
    follow_umask(tmp_path / "d")
    assert (_mode(tmp_path / "f"), _mode(tmp_path / "d")) == (0o666 & ~umask, 0o777 & ~umask)


def test_a_staged_output_directory_follows_the_umask(tmp_path: Path, umask: int) -> None:
    with staged_output(tmp_path / "out") as staging:
        (staging / "summary.json").write_text("{}")
    assert _mode(tmp_path / "out") == 0o777 & ~umask
    assert _mode(tmp_path / "out" / "summary.json") == 0o666 & ~umask


def test_run_and_convert_write_what_the_user_can_share(tmp_path: Path, umask: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(EXAMPLE), "--hw", "tiny", "--random-inputs", "0", "-o", "run"]) == 0
    assert main(["convert", str(EXAMPLE), "-o", "g.json"]) == 0
    assert {_mode(p) for p in [tmp_path / "run", *(tmp_path / "run").rglob("*")] if p.is_dir()} == {0o777 & ~umask}
    assert {_mode(p) for p in (tmp_path / "run").rglob("*") if p.is_file()} == {0o666 & ~umask}
    assert _mode(tmp_path / "g.json") == 0o666 & ~umask
