"""What a model's results depend on besides its weights: the code that builds and runs it.

A cached clean result may only be reused while that code is unchanged. The identity of a
model's code is a digest of

* the source of every module of the user's project that defines the factory or a class of
  the model (its own class, its bases, the classes of its submodules), followed through
  their imports, recursively, as long as they stay in the project;
* the name and version of every installed distribution those modules import;
* the Python version;
* what that code was seen to read (:mod:`pytest_segrobust.provenance.reads`): the files under the
  project that those modules read when they were imported, and, given by the caller, the
  files a model's build read and the project modules it imported by name (their source,
  followed as above).

A module counts as the project's when its file lies outside the interpreter's standard
library and site-packages (an editable install is the project's too: its source is read).
When a module that defines the model has no readable source (a class made in an
interactive session, a module built at run time), the identity cannot be established and
:class:`UnknownIdentity` is raised: such a result must not be reused across runs.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_segrobust.provenance import reads


class UnknownIdentity(Exception):
    """The code behind a model cannot be identified; the message says which module."""


def code_identity(*objects: Any, modules: Iterable[str] = (), files: Iterable[str] = ()) -> str:
    """Digest of the code behind ``objects`` (factories, models), what it imports and what it read.

    Args:
        objects: Factories and models whose defining modules are followed.
        modules: Further modules to follow: those a build imported by name.
        files: Files a build read, relative to a watched root (:func:`pytest_segrobust.provenance.reads.watch`).

    Raises:
        UnknownIdentity: when a module defining one of the objects has no readable source.
    """
    digest = hashlib.blake2b(digest_size=20)
    digest.update(sys.version.encode())
    roots = sorted({name for obj in objects for name in _defining_modules(obj)})
    for root in roots:
        if _locate(root) is not None or _kind(root, None) == "stdlib":
            continue
        # A class may name its package's public module rather than the file it lives in.
        top = root.partition(".")[0]
        if top == root or _kind(top, _locate(top)) != "installed":
            raise UnknownIdentity(f"module {root!r} has no source file to identify it by")
    entries = set(_walk([*roots, *sorted(modules)]))
    entries.update(f"read {path} {reads.file_digest(path)}" for path in files)
    for entry in sorted(entries):
        digest.update(entry.encode())
        digest.update(b"\x1f")
    return digest.hexdigest()


def _defining_modules(obj: Any) -> Iterator[str]:
    """Names of the modules whose code decides what ``obj`` does."""
    if isinstance(obj, functools.partial):
        yield from _defining_modules(obj.func)
        return
    if inspect.isroutine(obj):
        if getattr(obj, "__module__", None):
            yield obj.__module__
        return
    classes = set(obj.__mro__ if inspect.isclass(obj) else type(obj).__mro__)
    if not inspect.isclass(obj):
        # Wrapped networks (an adapter's .module) and their submodules run as part of the model.
        for value in [obj, *getattr(obj, "__dict__", {}).values()]:
            modules = getattr(value, "modules", None)
            if callable(modules) and hasattr(value, "state_dict"):
                classes.update(cls for module in modules() for cls in type(module).__mro__)
    for cls in classes:
        if cls.__module__ != "builtins":
            yield cls.__module__


def _walk(roots: Iterable[str]) -> list[str]:
    """One line per module reached: ``source <name> <digest>`` or ``package <dist>==<version>``."""
    entries: set[str] = set()
    queue, seen = list(roots), set()
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        origin = _locate(name)
        kind = _kind(name, origin)
        if kind == "stdlib":
            continue  # the Python version stands for the standard library
        if origin is None:
            # An optional import that is not installed, or a module its package makes at run
            # time: the package's own version stands for it.
            queue.append(name.partition(".")[0])
            continue
        if kind == "installed":
            entries.add(_distribution(name) or f"file {name} {_file_digest(origin)}")
            continue
        entries.add(f"source {name} {_file_digest(origin)}")
        entries.update(f"read {path} {reads.file_digest(path)}" for path in reads.read_at_import(name))
        queue.extend(_imports(name, origin))
        queue.extend(_parents(name))
    return sorted(entries)


def _parents(name: str) -> Iterator[str]:
    """A package's ``__init__`` runs before its submodules: ``a.b.c`` -> ``a``, ``a.b``."""
    parts = name.split(".")
    for end in range(1, len(parts)):
        yield ".".join(parts[:end])


def _imports(name: str, origin: str) -> list[str]:
    """Modules a source file imports, absolute, found by reading it (never by importing it)."""
    if not origin.endswith(".py"):
        return []
    try:
        tree = ast.parse(Path(origin).read_bytes(), filename=origin)
    except (OSError, SyntaxError, ValueError):
        return []
    is_package = Path(origin).name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level else node.module
            except (ImportError, ValueError):
                continue
            if not base:
                continue
            found.append(base)
            # ``from package import name`` may name a submodule.
            found.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def _locate(name: str) -> str | None:
    """The file a module is (or would be) loaded from, without importing anything new."""
    module = sys.modules.get(name)
    if isinstance(module, ModuleType):
        spec = getattr(module, "__spec__", None)
        origin = getattr(module, "__file__", None) or (spec.origin if spec is not None else None)
        return origin if origin and Path(origin).is_file() else None
    if name in sys.builtin_module_names:
        return None
    parent, _, _ = name.rpartition(".")
    search: list[str] | None = None
    if parent:
        parent_module = sys.modules.get(parent)
        if parent_module is not None:
            search = list(getattr(parent_module, "__path__", []) or [])
        else:
            parent_origin = _locate(parent)
            if parent_origin is None or Path(parent_origin).name != "__init__.py":
                return None
            search = [str(Path(parent_origin).parent)]
        if not search:
            return None
    try:
        spec = importlib.machinery.PathFinder.find_spec(name, search)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return None
    return spec.origin if Path(spec.origin).is_file() else None


def _kind(name: str, origin: str | None) -> str:
    """``installed``, ``stdlib`` or ``project``."""
    if name in sys.builtin_module_names or name.partition(".")[0] in sys.stdlib_module_names:
        return "stdlib"
    if origin is None:
        return "project"
    installed, stdlib = reads.install_roots()
    path = Path(origin).resolve()
    if any(path.is_relative_to(root) for root in installed):  # checked first: site-packages may lie in the stdlib folder
        return "installed"
    if any(path.is_relative_to(root) for root in stdlib):
        return "stdlib"
    return "project"


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _distribution(name: str) -> str | None:
    top = name.partition(".")[0]
    names = _distributions().get(top)
    if not names:
        return None
    versions = []
    for dist in sorted(set(names)):
        try:
            versions.append(f"package {dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return " ".join(versions) or None


def _file_digest(origin: str) -> str:
    try:
        return hashlib.blake2b(Path(origin).read_bytes(), digest_size=16).hexdigest()
    except OSError as exc:
        raise UnknownIdentity(f"cannot read {origin} ({exc.strerror})") from exc
