"""Files the user names: read only regular files, write output directories all at once.

Reading: a FIFO or a device given as a graph would block or never end, a huge file would
be read whole; :func:`check_regular_file` refuses them before anything is opened.

Writing: ``run`` and ``exec`` write their files into a temporary directory beside ``-o``
and move it into place when it is complete (:func:`staged_output`), so that ``-o`` holds
exactly one run's files: a reused ``-o`` only the latest run's, an interrupted or failed
run leaves the previous results as they were, and concurrent runs into the same ``-o``
each swap in a whole directory (under a lock, last one wins). :func:`check_output_dir`
says what is wrong with ``-o`` before any work is done.

Permissions: what npu-sim writes belongs to the user as any file they write would, by
their umask (:func:`follow_umask`); the temporary directories and files that make writes
atomic (``mkdtemp``: 0700, ``mkstemp``: 0600) are given those permissions before they
take the place of the result.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from npu_sim.errors import PathError

#: Largest graph file read (a flatbuffer cannot exceed 2 GiB).
GRAPH_MAX_BYTES = 2 << 30
#: A file in a directory npu-sim wrote: such a directory may be replaced by the next run.
MARKER_FILE = ".npu-sim-output"
_NAME_MAX_FALLBACK = 255


def check_regular_file(path: Path, what: str, max_bytes: int | None = None) -> int:
    """The size of ``path`` after checking it is a readable regular file (never opening a
    FIFO or a device, which could block); raise :class:`PathError` saying what is wrong.
    The message starts with ``what`` and the path (only the path if ``what`` is empty)."""
    where = f"{what} {str(path)!r}" if what else str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise PathError(f"{where}: dangling symbolic link") from None
        raise PathError(f"{where}: no such file") from None
    except OSError as exc:
        raise PathError(f"{where}: cannot read ({_reason(exc)})") from None
    if stat.S_ISDIR(info.st_mode):
        raise PathError(f"{where}: is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise PathError(f"{where}: not a regular file (a FIFO, socket or device)")
    if max_bytes is not None and info.st_size > max_bytes:
        raise PathError(f"{where}: {info.st_size} bytes, more than the {max_bytes} "
                        "bytes npu-sim reads")
    if not os.access(path, os.R_OK):
        raise PathError(f"{where}: cannot read (permission denied)")
    return info.st_size


def read_regular_file(path: Path, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (see :func:`check_regular_file`)."""
    check_regular_file(path, what, max_bytes)
    where = f"{what} {str(path)!r}" if what else str(path)
    try:
        with open(path, "rb") as handle:
            # (what it holds now, and a byte more: read(max_bytes + 1) would allocate a buffer of
            # the limit, 2 GiB for a graph, 20 ms of a 25 MB model's run; a file grown since is read on)
            expected = min(os.fstat(handle.fileno()).st_size, max_bytes) + 1
            data = handle.read(expected)
            if len(data) == expected and expected <= max_bytes:
                data += handle.read(max_bytes + 1 - expected)
            return data
    except OSError as exc:
        raise PathError(f"{where}: cannot read ({_reason(exc)})") from None


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def current_umask() -> int:
    """The process's umask (from /proc where it says, else set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(path: Path | str) -> None:
    """Give ``path`` the permissions a new file (0666) or directory (0777) gets by the umask."""
    full = 0o777 if os.path.isdir(path) else 0o666
    os.chmod(path, full & ~current_umask())


def write_atomically(target: Path, write: Callable[[Path], None], what: str) -> None:
    """Have ``write`` fill a temporary file beside ``target`` that then takes its place (with
    the permissions of the umask): ``target`` is whole or as it was, never half written.
    :class:`PathError` (naming ``what`` and the path) when it cannot be written."""
    directory = target.parent if str(target.parent) else Path(".")
    try:
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.tmp-", suffix=target.suffix)
        os.close(handle)
        try:
            write(Path(temporary))
            follow_umask(temporary)
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    except OSError as exc:
        raise PathError(f"{what} {str(target)!r}: cannot write ({_reason(exc)})") from None


# --- output directories -------------------------------------------------------------------

def check_output_dir(out_dir: Path | str) -> Path:
    """``-o`` as an absolute path, after checking that a run could replace it: not empty,
    not a file, not a dangling link, a name the file system takes, a writable parent, not
    the working directory or one above it, and (when it exists) empty or written by npu-sim."""
    text = os.fspath(out_dir)
    if not text.strip():
        raise PathError("-o: empty path; name the output directory")
    path = Path(os.path.abspath(text))
    parent = _existing_parent(path)
    name_max = _name_max(parent)
    for part in path.parts:
        if len(os.fsencode(part)) > name_max:
            raise PathError(f"-o {text!r}: a name of {len(os.fsencode(part))} bytes is longer than "
                            f"the {name_max} the file system allows")
    if os.path.lexists(path) and not os.path.exists(path):
        raise PathError(f"-o {text!r}: dangling symbolic link")
    if os.path.commonpath([path, Path.cwd()]) == str(path):
        raise PathError(f"-o {text!r}: is the working directory or above it; name a directory of its own")
    if os.path.exists(path):
        _check_replaceable(path, text)
    if not parent.is_dir():
        raise PathError(f"-o {text!r}: {str(parent)!r} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PathError(f"-o {text!r}: cannot write in {str(parent)!r} (permission denied)")
    return path


def _check_replaceable(path: Path, text: str) -> None:
    if not path.is_dir():
        raise PathError(f"-o {text!r}: exists and is not a directory")
    try:
        entries = os.listdir(path)
    except OSError as exc:
        raise PathError(f"-o {text!r}: cannot list it ({_reason(exc)})") from None
    if entries and MARKER_FILE not in entries:
        raise PathError(f"-o {text!r}: a non-empty directory npu-sim did not write; "
                        "name a new or empty directory (a run replaces all its contents)")


def _existing_parent(path: Path) -> Path:
    parent = path.parent
    while not os.path.exists(parent) and parent != parent.parent:
        parent = parent.parent
    return parent


def _name_max(directory: Path) -> int:
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return _NAME_MAX_FALLBACK


@contextmanager
def staged_output(out_dir: Path | str) -> Iterator[Path]:
    """A fresh directory to write a run's files into; on success it replaces ``out_dir``
    as a whole, on any failure (or Ctrl-C) it is removed and ``out_dir`` is untouched."""
    target = check_output_dir(out_dir)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        follow_umask(staging)
    except OSError as exc:
        raise PathError(f"-o {os.fspath(out_dir)!r}: cannot create it ({_reason(exc)})") from None
    try:
        (staging / MARKER_FILE).write_text("written by npu-sim; the next run into this directory replaces it\n")
        yield staging
        _swap_into_place(staging, target)
    except OSError as exc:
        raise PathError(f"-o {os.fspath(out_dir)!r}: cannot write the results ({_reason(exc)}); "
                        "previous results left as they were") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_into_place(staging: Path, target: Path) -> None:
    """Replace ``target`` with ``staging`` (under a lock beside it, so that concurrent runs
    swap one at a time and each leaves a whole directory)."""
    with _locked(target.parent / f".{target.name}.lock"):
        old = None
        if os.path.lexists(target):
            _check_replaceable(target, str(target))
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.rename(target, old / "previous")
        try:
            os.rename(staging, target)
        except OSError:
            if old is not None:   # put the previous results back
                os.rename(old / "previous", target)
            raise
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)


@contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path``; the lock file is removed when released."""
    if sys.platform == "win32":  # pragma: no cover - no flock; a byte-range lock, file kept
        import msvcrt

        handle = open(lock_path, "a+b")
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
            yield
        finally:
            handle.close()
        return
    import fcntl

    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.stat(lock_path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:   # the holder before us removed it: lock the new one
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        os.unlink(lock_path)
        os.close(fd)
