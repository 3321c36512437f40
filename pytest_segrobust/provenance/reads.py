"""What a model's code reads besides its source: files under the project and modules imported by name.

A cached clean result is keyed by the model's code (:mod:`pytest_segrobust.provenance.identity`), found
by reading its source. Behaviour can also come from a file the code reads (a config, a label
map) or from a module it imports by name (``importlib.import_module(name)``), which no source
shows. Both are seen here while the code runs and folded into the model's identity:

* **while a project module is imported** (its top level runs), the files it reads under a
  watched root are kept for that module; whichever model's code reaches the module counts them;
* **while a model is built** (:func:`recording`, around the factory call), the files read by
  the call and the modules it imports by name (``import_module``, ``__import__``), cached in
  ``sys.modules`` or not, are kept for that model.

Files are seen through Python's audit hook for ``open`` (``open``, ``io.open``, ``pathlib``,
``os.open``, ``torch.load``...), read-only opens only, under a watched root (the rootdir),
outside the interpreter's installed packages, and not Python source or bytecode (the source
identity has those). What a C library opens by itself, what a module's top level reads before
the run starts (a module a ``conftest.py`` imports), what the model reads after it is built
(while predicting) and what a module's top level imports by computed name are not seen. An
audit hook cannot be removed: it is installed once per process and does nothing but return
for every other event.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import importlib
import importlib.machinery
import os
import site
import sys
import sysconfig
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

_SOURCE_SUFFIXES = frozenset(importlib.machinery.all_suffixes()) | {".pyc"}
_SKIPPED_FOLDERS = frozenset({"__pycache__", ".pytest_cache", ".git"})


@dataclass
class Reads:
    """What one build read: files (relative to their root, ``/``-separated) and modules imported by name."""

    files: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)


_roots: list[str] = []  # watched folders, absolute, with a trailing separator
_installed: tuple[str, ...] = ()
_by_module: dict[str, set[str]] = {}  # project module -> files its top level read while it was imported
_local = threading.local()  # .reads: the Reads of the build running in this thread, if any
_hooked = False
_patch_lock = threading.Lock()
_patched = 0
_digests: dict[tuple[str, int, int], str] = {}


def watch(root: Path) -> None:
    """Watch the files read under ``root`` from now on in this process (installs the audit hook once).

    ``root`` replaces the root watched before: a session watches its own rootdir, and a file's
    digest must come from that project, never from an earlier session's in the same process
    (in-process pytest runs), which may hold a file of the same relative name.
    """
    global _hooked, _installed
    folder = os.path.join(os.path.abspath(root), "")
    _roots[:] = [folder]
    if not _hooked:
        installed, stdlib = install_roots()
        _installed = tuple(os.path.join(str(p), "") for p in (*installed, *stdlib))
        sys.addaudithook(_audit)
        _hooked = True


def read_at_import(module: str) -> set[str]:
    """The files ``module``'s top level read (under a watched root) when this process imported it."""
    return _by_module.get(module, set())


@contextmanager
def recording() -> Iterator[Reads]:
    """Keep what the code run inside reads (in this thread): files, and modules imported by name."""
    global _patched
    reads = Reads()
    previous = getattr(_local, "reads", None)
    _local.reads = reads
    with _patch_lock:
        if _patched == 0:
            _patch_imports()
        _patched += 1
    try:
        yield reads
    finally:
        with _patch_lock:
            _patched -= 1
            if _patched == 0:
                _unpatch_imports()
        _local.reads = previous
        if previous is not None:  # a build inside a build: the outer one read it too
            previous.files |= reads.files
            previous.modules |= reads.modules


@contextmanager
def unrecorded() -> Iterator[None]:
    """Run the code inside as the package's own work, not the model's: what it reads or imports
    (installed plugins found through their entry points, say) is not kept for the build around it."""
    previous = getattr(_local, "reads", None)
    _local.reads = None
    try:
        yield
    finally:
        _local.reads = previous


def file_digest(relative: str) -> str:
    """Digest of a file read under a watched root (``missing`` where it is gone), by size and mtime."""
    for root in _roots:
        path = root + relative
        try:
            stat = os.stat(path)
        except OSError:
            continue
        key = (path, stat.st_size, stat.st_mtime_ns)
        if key not in _digests:
            try:
                digest = hashlib.blake2b(digest_size=16)
                with open(path, "rb") as handle:
                    while chunk := handle.read(1 << 20):
                        digest.update(chunk)
                _digests[key] = digest.hexdigest()
            except OSError:
                return "unreadable"
        return _digests[key]
    return "missing"


# -- seeing reads -------------------------------------------------------------------------


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _roots:
        return
    try:
        _seen_open(*args[:3])
    except Exception:  # noqa: BLE001,S110 - an audit hook must never break the open it watches
        pass


def _seen_open(path: Any, mode: Any, flags: Any) -> None:
    if isinstance(path, int):
        return  # a file descriptor
    if isinstance(mode, str):
        if any(c in mode for c in "wax+"):
            return
    elif isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR):
        return
    relative = _under_root(os.path.abspath(os.fsdecode(path)))
    if relative is None:
        return
    importing = _importing_module(sys._getframe(2))
    if importing is not None:
        if importing != "":
            _by_module.setdefault(importing, set()).add(relative)
        return  # an installed module's import: not the project's
    reads = getattr(_local, "reads", None)
    if reads is not None:
        reads.files.add(relative)


def _under_root(path: str) -> str | None:
    """``path`` relative to the innermost watched root (``/``-separated), or None where it is not a project input."""
    if path.startswith(_installed) or os.path.splitext(path)[1] in _SOURCE_SUFFIXES:
        return None
    for root in _roots:
        if path.startswith(root):
            parts = path[len(root) :].split(os.sep)
            if _SKIPPED_FOLDERS.intersection(parts) or any(part.endswith(".egg-info") for part in parts):
                return None
            return "/".join(parts)
    return None


def _importing_module(frame: FrameType | None) -> str | None:
    """The module whose top level is running, innermost first, while it is imported.

    Its name when it is the project's, ``""`` when it is installed, ``None`` when no module is
    being imported (the code runs in a function called after the imports).
    """
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            name = frame.f_globals.get("__name__")
            spec = frame.f_globals.get("__spec__")
            if isinstance(name, str) and getattr(spec, "_initializing", False):
                return name if _is_project_source(frame.f_code.co_filename) else ""
        frame = frame.f_back
    return None


def _is_project_source(filename: str) -> bool:
    """Whether a module's file lies under a watched root, outside the installed packages."""
    path = os.path.abspath(filename)
    return not path.startswith(_installed) and path.startswith(tuple(_roots))


def _is_project_module(name: str) -> bool:
    """Whether ``name`` (or the nearest package above it that is imported) is the project's."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:end]))
        if module is not None:
            filename = getattr(module, "__file__", None)
            return isinstance(filename, str) and _is_project_source(filename)
    return False


# -- seeing imports by name ---------------------------------------------------------------

_original_gcd_import: Any = None
_original_import: Any = None


def _patch_imports() -> None:
    """Wrap the two doors to an import by name: ``importlib.import_module`` (through
    ``importlib._bootstrap._gcd_import``, so a copy of ``import_module`` bound before is seen
    too) and ``__import__``. Only the building thread's calls are kept."""
    global _original_gcd_import, _original_import
    bootstrap = getattr(importlib, "_bootstrap", None)
    if bootstrap is not None and hasattr(bootstrap, "_gcd_import"):
        _original_gcd_import = bootstrap._gcd_import
        original = _original_gcd_import

        def gcd_import(name: str, package: str | None = None, level: int = 0) -> Any:
            module = original(name, package, level)
            _note(module.__name__)
            return module

        bootstrap._gcd_import = gcd_import
    _original_import = builtins.__import__
    original_import = _original_import

    def tracked_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        module = original_import(name, globals, locals, fromlist, level)
        if getattr(_local, "reads", None) is not None:
            if level == 0:
                _note(name)
            if fromlist:  # the named module itself, and its names that may be submodules
                _note(module.__name__)
                for item in fromlist:
                    if item != "*":
                        _note(f"{module.__name__}.{item}")
        return module

    builtins.__import__ = tracked_import


def _unpatch_imports() -> None:
    bootstrap = getattr(importlib, "_bootstrap", None)
    if bootstrap is not None and _original_gcd_import is not None:
        bootstrap._gcd_import = _original_gcd_import
    if _original_import is not None:
        builtins.__import__ = _original_import


def _note(name: str) -> None:
    """Keep a project module imported by name during a build (not by a module's top level while it is imported)."""
    reads = getattr(_local, "reads", None)
    if reads is None or name in reads.modules or not _is_project_module(name):
        return
    if _importing_module(sys._getframe(2)) is None:
        reads.modules.add(name)


@functools.lru_cache(maxsize=1)
def install_roots() -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(site-packages folders, standard-library folders) of this interpreter."""
    paths = sysconfig.get_paths()
    installed = {paths["purelib"], paths["platlib"], *site.getsitepackages()}
    user = site.getusersitepackages()
    if isinstance(user, str):
        installed.add(user)
    stdlib = {paths["stdlib"], paths["platstdlib"]}
    return (
        tuple(Path(p).resolve() for p in installed if p),
        tuple(Path(p).resolve() for p in stdlib if p),
    )
