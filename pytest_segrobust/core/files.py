"""Files a run writes: atomically, with the umask's usual mode, and never left half-written.

A write goes to a temporary file beside its target, named after the writing process
(``.<name>.<pid>.<random>.tmp``), and is renamed over the target once complete. A process
killed mid-write leaves its temporary behind; :func:`remove_stale_temporaries` deletes those
whose process is gone, so the next run cleans up after the last.

A path that is a symbolic link is written through: the file it points to is replaced, and the
link stays a link (a baseline or a report linked to a shared folder on purpose keeps
pointing there). A link to a folder that does not exist is not followed by making it.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from pytest_segrobust.core.errors import SegRobustError

_TEMPORARY = re.compile(r"^\..+\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp$")


class WriteError(SegRobustError):
    """A file of the run could not be written; the message names it and why."""


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` as :func:`atomic_write_bytes` does."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half.

    Raises:
        WriteError: naming the path and the reason (a read-only folder, a parent that is a
            file, a target that is a directory, a full disk).
    """
    shown = str(path)
    if path.is_symlink():
        target = Path(os.path.realpath(path))  # through every link of a chain
        shown = f"{path} (a symbolic link to {target})"
        path = target
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WriteError(f"cannot write {shown}: {why_not_written(path, exc)}") from exc
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        # os.open with 0o666 lets the umask decide the mode, as for any file the user writes.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteError(f"cannot write {shown}: {why_not_written(path, exc)}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the temporaries in ``folder`` left by writers that no longer run; returns them."""
    removed = []
    try:
        candidates = list(folder.iterdir())
    except OSError:
        return removed
    for path in candidates:
        match = _TEMPORARY.match(path.name)
        if match is None or _alive(int(match["pid"])):
            continue
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, under another user
        return True
    return True


def why_not_written(path: Path, exc: OSError) -> str:
    """What went wrong, in the user's terms rather than errno's."""
    if path.is_dir():
        return "it is a directory"
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{parent} is a file, not a folder"
            break
    return exc.strerror or type(exc).__name__


def relative(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` in POSIX form, or absolute when outside it."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(resolved)
