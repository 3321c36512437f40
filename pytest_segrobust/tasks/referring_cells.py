"""The suite keys of the tasks that read referring expressions (``referring``, ``rvos``): ``text_replay`` and ``mixture``.

A referring suite may list text perturbations (``misspelling``, ``mispunctuation``,
``grammar_error``, ``character_missing``) and cross-modal compositions of one image corruption
and one text perturbation (``gaussian_noise+misspelling``) in ``corruptions``
(:mod:`pytest_segrobust.text.cells`), and set::

    text_replay: replays/llm.json   # frozen perturbed texts (see pytest_segrobust.text.replay);
                                    # each perturbation NAME of the file is the cell replay-NAME
    mixture: r2bench                # adds the cell r2bench-mixture (see pytest_segrobust.text.cells)

``mixture`` is ``r2bench`` (drawing from the suite's listed single image corruptions, or the
preset's when it lists none, and its listed text perturbations, or the four built-in ones) or
``{protocol: r2bench, visual: [...], text: [...]}``. A ``text_replay`` path is relative to the
suite file.

``text_replay`` is read first (:func:`text_names`): the replayed perturbations are names the
suite's ``corruptions:`` may list. ``mixture`` is read with the cells (:func:`text_cells`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.corruptions.composition import SEPARATOR
from pytest_segrobust.corruptions.mixture import R2BENCH
from pytest_segrobust.tasks.base import SuiteCells, SuiteKeyError, SuiteNames, Task, suite_list
from pytest_segrobust.text.cells import MIXTURE_CELL, CellResolver, MixtureSpec
from pytest_segrobust.text.registry import TextPerturbationRegistry
from pytest_segrobust.text.replay import ReplayFileError, load_replay

TEXT_SUITE_KEYS = ("text_replay", "mixture")
REPLAY_PREFIX = "replay-"
"""A replay file's perturbation ``NAME`` is the cell ``replay-NAME``."""


@dataclass(frozen=True)
class TextCells(SuiteCells):
    """A referring suite's ``text_replay`` (the file, as the suite names it) and its ``mixture``."""

    text_replay: str | None = None
    mixture: MixtureSpec | None = None

    @property
    def added(self) -> tuple[str, ...]:  # type: ignore[override]
        return () if self.mixture is None else (MIXTURE_CELL,)

    def resolver(self, resolve: CellResolver) -> CellResolver:
        """``resolve``, resolving the mixture's cell as this suite sets it."""
        return resolve.with_mixture(self.mixture)

    def cell(self, name: str, resolve: Callable[..., Any]) -> Any:
        return self.resolver(resolve)(name)  # type: ignore[arg-type]


@dataclass(frozen=True)
class TextBeneath(SuiteCells):
    """A suite's text keys beneath a task's other keys (a clip task's ``static``, ``dynamic``, ``temporal``):
    the other cells resolve a name, the mixture's cell included, through the text keys' resolver."""

    text: TextCells
    other: SuiteCells

    @property
    def added(self) -> tuple[str, ...]:  # type: ignore[override]
        return (*self.text.added, *self.other.added)

    @property
    def once(self) -> tuple[str, ...]:  # type: ignore[override]
        return (*self.text.once, *self.other.once)

    def with_seed(self, seed: int) -> SuiteCells:
        return replace(self, other=self.other.with_seed(seed))

    def cell(self, name: str, resolve: Callable[..., Any]) -> Any:
        return self.other.cell(name, self.text.resolver(resolve))  # type: ignore[arg-type]


def text_beneath(
    options: Mapping[str, Any],
    corruptions: tuple[str, ...],
    resolve: CellResolver,
    other: Callable[[Mapping[str, Any], tuple[str, ...], CellResolver], SuiteCells],
) -> TextBeneath:
    """The text keys of ``options`` (:func:`text_cells`), then the others read by ``other`` with the
    text keys' cells listed and resolvable (a dynamic cell may draw from the listed ones)."""
    text = text_cells({k: v for k, v in options.items() if k in TEXT_SUITE_KEYS}, corruptions, resolve)
    rest = {k: v for k, v in options.items() if k not in TEXT_SUITE_KEYS}
    return TextBeneath(text, other(rest, (*corruptions, *text.added), text.resolver(resolve)))


def text_names(options: Mapping[str, Any], folder: Path) -> SuiteNames:
    """The built-in text perturbations and, with ``text_replay``, each of the file's as ``replay-NAME``.

    Raises:
        SuiteKeyError: for a ``text_replay`` that is not a string or not a readable replay file.
    """
    text = TextPerturbationRegistry.installed()
    raw = options.get("text_replay")
    if raw is not None:
        if not isinstance(raw, str):
            raise SuiteKeyError("text_replay", f"expected a string, got {raw!r}")
        try:
            replay = load_replay(folder / raw)
        except ReplayFileError as exc:
            raise SuiteKeyError("text_replay", str(exc)) from None
        for name in replay.names():
            text.register(replay.perturbation(name, registered_as=f"{REPLAY_PREFIX}{name}"))
    return SuiteNames(text, {MIXTURE_CELL: "mixture: r2bench"})


def text_cells(options: Mapping[str, Any], corruptions: tuple[str, ...], resolve: CellResolver) -> TextCells:
    """A referring suite's ``text_replay`` and ``mixture`` (see the module); ``resolve`` holds its text perturbations.

    Raises:
        SuiteKeyError: naming the field of the mixture at fault.
    """
    replay = options.get("text_replay")
    mixture = None if options.get("mixture") is None else _mixture(options["mixture"], corruptions, resolve)
    return TextCells(replay, mixture)


def text_key_refusal(key: str, task: Task) -> str | None:
    """Why a task without expressions takes neither ``text_replay`` nor the r2bench ``mixture``."""
    if key == "text_replay":
        return f"replayed texts perturb referring expressions; task {task.name} has none"
    if key == "mixture":
        return (
            "the r2bench mixture perturbs images and a second input (referring expressions, sound or prompts); "
            f"task {task.name} has no expressions and takes no mixture"
        )
    return None


class TextKeys:
    """What a task that reads expressions says of ``text_replay`` and ``mixture`` before its cells:
    the names they add (:func:`text_names`) and why another task takes neither
    (:func:`text_key_refusal`). Mixed into the referring tasks, before their :class:`Task` base."""

    def suite_names(self, options: Mapping[str, Any], folder: Path) -> SuiteNames:
        """The text perturbations, with ``text_replay``'s."""
        return text_names(options, folder)

    def suite_key_refusal(self, key: str, task: Task) -> str | None:
        return text_key_refusal(key, task)


def _mixture(raw: Any, corruptions: tuple[str, ...], resolve: CellResolver) -> MixtureSpec:
    """``mixture: r2bench`` or ``{protocol: r2bench, visual: [...], text: [...]}``."""
    text = resolve.text
    spec = {"protocol": raw} if isinstance(raw, str) else raw
    if not isinstance(spec, dict) or spec.get("protocol") != R2BENCH:
        raise SuiteKeyError(
            "mixture", f"expected 'r2bench' or a mapping {{protocol: r2bench, visual: [...], text: [...]}}, got {raw!r}"
        )
    unknown = sorted(set(spec) - {"protocol", "visual", "text"})
    if unknown:
        raise SuiteKeyError(f"mixture.{unknown[0]}", "unknown field; expected protocol, visual or text")
    listed_visual = [c for c in corruptions if SEPARATOR not in c and c not in text]
    listed_text = [c for c in corruptions if c in text]
    if "visual" in spec:
        visual = tuple(
            _mixture_names("mixture.visual", spec["visual"], lambda n: n not in text and SEPARATOR not in n, text)
        )
        for i, name in enumerate(visual):
            try:
                resolve.image(name)
            except SegRobustError as exc:
                raise SuiteKeyError(f"mixture.visual[{i}]", str(exc)) from None
    else:
        visual = tuple(listed_visual) or tuple(c.name for c in resolve.registry.preset(resolve.preset))
    if "text" in spec:
        chosen = tuple(_mixture_names("mixture.text", spec["text"], lambda n: n in text, text))
    else:
        chosen = tuple(listed_text) or tuple(p.name for p in TextPerturbationRegistry.builtin())
    return MixtureSpec(R2BENCH, visual, chosen)


def _mixture_names(
    field_name: str, raw: Any, fits: Callable[[str], bool], text: TextPerturbationRegistry
) -> tuple[str, ...]:
    def refusal(name: str) -> str | None:
        if fits(name):
            return None
        kind = (
            "an image corruption"
            if field_name.endswith("visual")
            else f"a text perturbation ({', '.join(text.names())})"
        )
        return f"expected {kind}, got {name!r}"

    return suite_list(field_name, raw, "names", refusal)
