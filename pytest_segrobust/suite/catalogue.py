"""Everything a suite may name, grouped by family: what ``segrobust list`` prints.

A *perturbation family* holds the perturbations of one :class:`~pytest_segrobust.core.modality.Category`
whose modality is not visual (``temporal``, ``acoustic``, ``text``...), or every perturbation of
visual modality (:data:`IMAGE`): its groups are the presets of a corruption registry (each preset
listed in every family it has a member of) and, for the text family, the text perturbation
registry. A perturbation a plugin registers appears in the family its category says.

A *suite key family* holds the suite keys that add cells of their own (``dynamic``, ``mixture``,
``text_replay``): what each adds and the values it accepts, read from the definitions the
suite's loader checks against, and the tasks that take the key (:attr:`Task.suite_keys
<pytest_segrobust.tasks.base.Task.suite_keys>`).

Layer: suite (reads the perturbation families and the tasks; the CLI prints it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_segrobust.core.modality import DYNAMIC_PREFIX, Category, Modality, modality_of_category
from pytest_segrobust.core.prompts import PromptedInstances
from pytest_segrobust.core.types import Audio, Expressions, Field
from pytest_segrobust.corruptions import DEFAULT_PRESET, CorruptionRegistry
from pytest_segrobust.corruptions.base import MAX_SEVERITY, Corruption, SeverityTable
from pytest_segrobust.corruptions.dynamic import FRAME_DRAW_SPELLINGS, DynamicMode
from pytest_segrobust.corruptions.mixture import R2BENCH, MixtureProtocol
from pytest_segrobust.tasks import TASKS, get_task
from pytest_segrobust.tasks.avs import AUDIO_VISUAL_MIXTURE
from pytest_segrobust.tasks.avs import MIXTURE_CELL as AUDIO_VISUAL_CELL
from pytest_segrobust.tasks.base import Task
from pytest_segrobust.tasks.prompt_mixture import MIXTURE_CELL as PROMPT_CELL
from pytest_segrobust.tasks.prompt_mixture import PROMPT_MIXTURE
from pytest_segrobust.tasks.referring_cells import REPLAY_PREFIX
from pytest_segrobust.text.base import FAMILY as TEXT_FAMILY
from pytest_segrobust.text.base import LEVELS, TextPerturbation
from pytest_segrobust.text.cells import MIXTURE_CELL as REFERRING_CELL
from pytest_segrobust.text.mixture import REFERRING_MIXTURE
from pytest_segrobust.text.registry import TextPerturbationRegistry

IMAGE = "image"
"""The family of every perturbation of visual modality: the image corruption presets."""

DYNAMIC, MIXTURE, REPLAY = Modality.DYNAMIC.value, Modality.MIXTURE.value, "replay"
# The field a task must have for a mixture protocol's other modality.
_OTHER_FIELD: dict[Modality, type[Field]] = {
    Modality.TEXT: Expressions,
    Modality.AUDIO: Audio,
    Modality.PROMPT: PromptedInstances,
}


@dataclass(frozen=True)
class Entry:
    """One perturbation as listed.

    Attributes:
        name: What a suite writes.
        tags: Its category, then how it changes its input (each once).
        level: What a level's parameters mean (the first paragraph of the docstring of its
            severity table's row type); empty where the row type declares none.
        rows: One line of parameters per severity 1..5.
        description: A line of its own, where it has one (a text perturbation's).
    """

    name: str
    tags: tuple[str, ...]
    level: str
    rows: tuple[str, ...]
    description: str = ""


@dataclass(frozen=True)
class Group:
    """A preset, the text registry, or a suite key, within a family.

    Attributes:
        name: The preset's name, ``text``, or the suite key.
        heading: The line above its entries.
        entries: Its perturbations of the family, in order (none for a suite key).
        details: What a suite key adds and accepts, a line each.
        selectable: Whether ``--preset`` names it (a preset or the text registry).
    """

    name: str
    heading: str
    entries: tuple[Entry, ...] = ()
    details: tuple[str, ...] = ()
    selectable: bool = True


@dataclass(frozen=True)
class Family:
    """A family of what a suite may name.

    Attributes:
        name: What ``--family`` takes.
        heading: One line: what it holds and where a suite names it.
        groups: Its presets (or the text registry, or its suite keys), in order.
        suite_key: Whether it is a suite key family (its names are suite keys, not perturbations).
    """

    name: str
    heading: str
    groups: tuple[Group, ...]
    suite_key: bool = False

    def names(self, groups: Iterable[Group] | None = None) -> list[str]:
        """Its perturbations' names (a suite key family's: its keys), of ``groups`` (default all), each once."""
        chosen = self.groups if groups is None else tuple(groups)
        if self.suite_key:
            return list(dict.fromkeys(group.name for group in chosen))
        return list(dict.fromkeys(entry.name for group in chosen for entry in group.entries))


def catalogue(registry: CorruptionRegistry, text: TextPerturbationRegistry) -> list[Family]:
    """Every family: the perturbation families (image first, then by modality), then the suite key families.

    Args:
        registry: The corruption presets (plugins' registrations included).
        text: The text perturbations (plugins' included: :meth:`TextPerturbationRegistry.load_installed`).
    """
    return [*_perturbation_families(registry, text), *_suite_key_families()]


def family_of(category: Category) -> str:
    """The family a perturbation of ``category`` is listed in: :data:`IMAGE` for visual modality, else the category."""
    # Through the value, so that a plugin's category enum of its own counts as visual, as the report counts it.
    return IMAGE if modality_of_category(category.value) is Modality.VISUAL else category.value


def level_meaning(table: SeverityTable[Any]) -> str:
    """The first paragraph of the docstring of the table's row type, or ``""`` where it declares none
    (a dataclass's generated ``Name(field: type)`` says nothing a row does not)."""
    row_type = type(table.rows[0])
    doc = vars(row_type).get("__doc__") or ""
    if not doc.strip() or doc.startswith(f"{row_type.__name__}("):
        return ""
    return " ".join(doc.strip().split("\n\n")[0].split()).replace("``", "")  # rST literals read plain here


def _corruption_entry(corruption: Corruption[Any]) -> Entry:
    tags = tuple(dict.fromkeys((corruption.category.value, corruption.kind)))
    return Entry(corruption.name, tags, level_meaning(corruption.table), tuple(corruption.table.describe()))


def _text_entry(perturbation: TextPerturbation) -> Entry:
    table = getattr(perturbation, "table", None)
    if not isinstance(table, SeverityTable):
        return Entry(perturbation.name, (perturbation.family,), "", (), perturbation.description)
    level, rows = level_meaning(table), tuple(table.describe())
    return Entry(perturbation.name, (perturbation.family,), level, rows, perturbation.description)


def _modality_rank(family: str) -> tuple[int, str]:
    modality = modality_of_category(family)  # IMAGE is no category: visual
    return (list(Modality).index(modality), family)


def _tasks(keep: Callable[[Task], bool]) -> str:
    """The names of the tasks ``keep(task)`` holds for, as ``task a, b``."""
    names = [name for name in TASKS.names() if keep(get_task(name))]
    return f"task{'s' if len(names) != 1 else ''} {', '.join(names)}"


def _perturbation_families(registry: CorruptionRegistry, text: TextPerturbationRegistry) -> list[Family]:
    presets = sorted(registry.presets(), key=lambda name: (name != DEFAULT_PRESET, name))
    members: dict[str, dict[str, list[Corruption[Any]]]] = {}
    for preset in presets:
        for corruption in registry.preset(preset):
            members.setdefault(family_of(corruption.category), {}).setdefault(preset, []).append(corruption)
    text_entries = tuple(_text_entry(perturbation) for perturbation in text)
    if text_entries:
        members.setdefault(TEXT_FAMILY, {})
    families = []
    for name in sorted(members, key=_modality_rank):
        groups = [
            Group(preset, _preset_heading(registry, preset), tuple(_corruption_entry(c) for c in corruptions))
            for preset, corruptions in members[name].items()
        ]
        if name == TEXT_FAMILY:
            groups.append(Group(TEXT_FAMILY, _text_heading(), text_entries))
        families.append(Family(name, _family_heading(name), tuple(groups)))
    return families


def _preset_heading(registry: CorruptionRegistry, preset: str) -> str:
    default = " (default)" if preset == DEFAULT_PRESET else ""
    return f"preset {preset}{default}: {registry.definition(preset).description}"


def _family_heading(name: str) -> str:
    if name == IMAGE:
        return f"family {IMAGE}: image corruptions by preset; a suite's 'preset:' picks one, 'corruptions:' names them"
    modality = modality_of_category(name).value
    takers = [task for task in TASKS.names() if name in get_task(task).suite_keys]
    if takers:
        where = f"the suite key '{name}:' adds them ({_tasks(lambda task: name in task.suite_keys)})"
    elif name == TEXT_FAMILY:
        where = f"a suite's 'corruptions:' names them, alone or as IMAGE+TEXT ({_tasks(_reads_text)})"
    else:
        where = "a suite's 'corruptions:' names them (in their preset)"
    return f"family {name} (acts on {modality}): {where}"


def _reads_text(task: Task) -> bool:
    return Expressions in task.target_types


def _text_heading() -> str:
    levels = ", ".join(f"{word} = {severity}" for word, severity in LEVELS.items())
    return f"{TEXT_FAMILY}: perturbations of referring expressions; named levels {levels}"


def _suite_key_families() -> list[Family]:
    families = []
    for family, (key, groups_of) in _SUITE_KEYS.items():
        if not any(key in get_task(name).suite_keys for name in TASKS.names()):
            continue  # no task takes it any more: nothing to list
        groups = groups_of(key)
        families.append(
            Family(family, f"family {family}: cells the suite key '{key}:' adds", tuple(groups), suite_key=True)
        )
    return families


def _dynamic(key: str) -> list[Group]:
    default = DynamicMode()  # what a suite's dynamic: leaves out
    levels, types = ", ".join(map(str, default.levels)), default.to_json()["types"]
    return [
        Group(
            key,
            f"{key} ({_tasks(lambda task: key in task.suite_keys)}): adds the cell {DYNAMIC_PREFIX}PARTS], run once: "
            "each frame (or clip) draws its own perturbation and level",
            details=(
                "corruptions: the perturbations of frames it draws from (default: the suite's listed ones)",
                f"types: {' or '.join(FRAME_DRAW_SPELLINGS)}: how often it draws a perturbation (default: {types})",
                f"levels: the severities 1..{MAX_SEVERITY} it draws a level from (default: {levels})",
            ),
            selectable=False,
        )
    ]


def _mixture(key: str) -> list[Group]:
    protocols: Sequence[tuple[MixtureProtocol, str]] = (
        (REFERRING_MIXTURE, REFERRING_CELL),
        (AUDIO_VISUAL_MIXTURE, AUDIO_VISUAL_CELL),
        (PROMPT_MIXTURE, PROMPT_CELL),
    )
    groups = []
    for protocol, cell in protocols:
        other = protocol.other.value
        field = _OTHER_FIELD[protocol.other]

        def takes(task: Task, field: type[Field] = field) -> bool:
            return key in task.suite_keys and (field in task.target_types or field in task.collates.values())

        groups.append(
            Group(
                key,
                f"{key}: {R2BENCH} ({_tasks(takes)}): adds the cell {cell}: per sample {protocol.shares()}",
                details=(
                    f"protocol: {R2BENCH}",
                    f"visual: the image perturbations drawn from; {other}: the {other} perturbations drawn from",
                ),
                selectable=False,
            )
        )
    return groups


def _replay(key: str) -> list[Group]:
    return [
        Group(
            key,
            f"{key} ({_tasks(lambda task: key in task.suite_keys)}): a replay file of frozen perturbed texts; "
            f"each of its perturbations NAME is the cell {REPLAY_PREFIX}NAME, which 'corruptions:' may name",
            selectable=False,
        )
    ]


# Each suite key family: the suite key behind it and what it adds.
_SUITE_KEYS: dict[str, tuple[str, Callable[[str], list[Group]]]] = {
    DYNAMIC: ("dynamic", _dynamic),
    MIXTURE: ("mixture", _mixture),
    REPLAY: ("text_replay", _replay),
}
