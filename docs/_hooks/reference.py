"""MkDocs hook: the reference pages that are generated from the code at every build, so they cannot drift.

* ``reference/suite-fields.md``: every top-level suite key (:data:`pytest_segrobust.suite.schema.SUITE_KEYS`,
  the list the loader accepts), the fields of the nested mappings with their types, defaults and
  meanings (the schema's dataclasses and their docstrings), each task's own keys and default
  metrics, and every metric's direction and scale;
* ``reference/cli.md``: the ``segrobust`` command, from the argparse parsers ``cli.main`` builds;
* ``reference/options.md``: the command-line and ini options, from the plugin's ``pytest_addoption``;
* ``reference/catalogue.md``: every perturbation family with its severity tables (what
  ``segrobust list`` prints), with gallery pictures drawn by ``segrobust gallery`` itself.

MkDocs loads this file by path (``hooks:`` in ``mkdocs.yml``); it is never part of the package.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from griffe import Docstring, DocstringSectionKind
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

# Pixels of one gallery tile: small pages, a build of seconds.
GALLERY_TILE = 56
# Left out of the pictures: frost makes its bank of procedural frost photographs first (about 10
# CPU-s, more than the rest of the build); `segrobust gallery --preset imagenet-c` draws it.
NOT_DRAWN = frozenset({"frost"})
# argparse wraps help text at the terminal's width: fixed, so that a build is the same everywhere.
HELP_COLUMNS = "100"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages (and the gallery pictures) to the site's files."""
    for uri, content in generated_files().items():
        files.append(File.generated(config, uri, content=content))
    return files


def generated_files() -> dict[str, str | bytes]:
    """Every generated file by its path under ``docs/``: markdown pages and PNG pictures."""
    pictures = gallery_pictures()
    return {
        "reference/suite-fields.md": suite_fields_page(),
        "reference/cli.md": cli_page(),
        "reference/options.md": options_page(),
        "reference/catalogue.md": catalogue_page(set(pictures)),
        **{f"reference/gallery/{preset}.png": png for preset, png in pictures.items()},
    }


# A Sphinx cross-reference in a docstring (:class:`~a.b.C`, :meth:`C.m <a.b.C.m>`), shown as code.
_ROLE = re.compile(r":(?:class|meth|attr|mod|data|func|exc):`~?(?:([^`<]+?) <[^`>]+>|([^`]+))`")


def _plain_role(match: re.Match[str]) -> str:
    shown = match[1] or match[2]
    return f"`{shown if match[1] else shown.rsplit('.', 1)[-1] if match[0].count('~') else shown}`"


def _cell(text: object) -> str:
    """``text`` as one markdown table cell: on one line, Sphinx roles as code, its pipes escaped."""
    return _ROLE.sub(_plain_role, " ".join(str(text).split())).replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return [*lines, *("| " + " | ".join(_cell(value) for value in row) + " |" for row in rows)]


def attribute_docs(cls: type) -> dict[str, str]:
    """The ``Attributes:`` section of ``cls``'s Google-style docstring, by attribute name."""
    parsed = Docstring(cls.__doc__ or "").parse("google")
    return {
        attribute.name: attribute.description
        for section in parsed
        if section.kind is DocstringSectionKind.attributes
        for attribute in section.value
    }


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        return "the fields' defaults"
    if isinstance(value, Mapping):
        return "{}" if not value else str(dict(value))
    return "null" if value is None else str(value)


def dataclass_rows(prefix: str, cls: type) -> list[list[str]]:
    """One row per field of the dataclass ``cls``: ``prefix.field``, its type, default and meaning."""
    meanings = attribute_docs(cls)
    return [
        [f"`{prefix}.{f.name}`", f"`{f.type}`", f"`{_default(f)}`", meanings.get(f.name, "")]
        for f in dataclasses.fields(cls)
    ]


def suite_fields_page() -> str:
    """Every suite key with its type, default and meaning, read from the schema, the tasks and the metrics."""
    from pytest_segrobust.metrics import METRICS
    from pytest_segrobust.suite.schema import SUITE_KEYS, DegradationSettings, GatePolicy, Shifts, Tolerance
    from pytest_segrobust.tasks import TASKS, get_task

    lines = [
        "# Suite fields",
        "",
        "Generated from `pytest_segrobust/suite/schema.py` at every build: the keys below are exactly the",
        "ones the loader accepts. How to write a suite, with examples: [Suite files](suites.md).",
        "",
        "## Top-level keys",
        "",
        *_table(("key", "type", "default", "meaning"), [(f"`{k.name}`", k.kind, k.default, k.meaning) for k in SUITE_KEYS]),
        "",
        "## Nested fields",
        "",
        "`gate.margin` takes the same fields as `tolerance`; `require:` is described in",
        "[Write a release policy](../how-to/release-policy.md).",
        "",
    ]
    nested = (("tolerance", Tolerance), ("gate", GatePolicy), ("cd", DegradationSettings), ("shifts", Shifts))
    rows = [row for prefix, cls in nested for row in dataclass_rows(prefix, cls)]
    lines += [*_table(("field", "type", "default", "meaning"), rows), ""]
    lines += [
        "## Tasks and their own keys",
        "",
        "A task's own keys are refused in a suite of another task, naming the task that takes them; what each",
        "adds is in the [perturbation catalogue](catalogue.md).",
        "",
    ]
    task_rows = []
    for name in TASKS.names():
        task = get_task(name)
        keys = ", ".join(f"`{key}`" for key in task.suite_keys) or "none"
        task_rows.append((f"`{name}`", ", ".join(f"`{m}`" for m in task.default_metrics), keys))
    lines += [*_table(("task", "default metrics (headline first)", "own keys"), task_rows), ""]
    lines += ["## Metrics", "", "What `metric:` and `metrics:` may name.", ""]
    metric_rows = []
    for name in METRICS.names():
        metric = METRICS.get(name)
        worst, best = metric.bounds
        direction = "higher" if metric.higher_is_better else "lower"
        metric_rows.append((f"`{name}`", f"{direction} is better", f"{worst:g} .. {best:g}"))
    lines += [*_table(("metric", "direction", "scale (worst .. best)"), metric_rows), ""]
    return "\n".join(lines)


class _Captured(Exception):
    """Carries the parser ``cli.main`` built, out of its ``parse_args`` call."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__("parser captured")
        self.parser = parser


def cli_parser() -> argparse.ArgumentParser:
    """The parser ``pytest_segrobust.cli.main`` builds, taken at the moment it would parse."""
    from pytest_segrobust import cli

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Captured(self)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", capture):
        try:
            cli.main([])
        except _Captured as captured:
            return captured.parser
    raise RuntimeError("pytest_segrobust.cli.main returned without parsing its arguments")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse offers no public way to walk subcommands
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@contextlib.contextmanager
def _columns(width: str) -> Iterator[None]:
    with mock.patch.dict(os.environ, {"COLUMNS": width}):
        yield


def cli_page() -> str:
    """The ``segrobust`` command and each subcommand's help, as argparse prints them."""
    parser = cli_parser()
    lines = [
        "# The `segrobust` command",
        "",
        "Generated from the argparse parsers of `pytest_segrobust/cli.py` at every build.",
        "",
    ]
    with _columns(HELP_COLUMNS):
        lines += ["```text", parser.format_help().rstrip(), "```", ""]
        for name, sub in _subcommands(parser).items():
            lines += [f"## `segrobust {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


class OptionRecorder:
    """Stands in for pytest's parser: records what ``pytest_addoption`` declares."""

    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.ini: list[tuple[str, str, object]] = []

    def getgroup(self, name: str, description: str = "") -> OptionRecorder:
        return self

    def addoption(self, *names: str, **attrs: Any) -> None:
        self.options.append((names, attrs))

    def addini(self, name: str, help: str, type: str | None = None, default: object = None) -> None:
        self.ini.append((name, help, default))


def _option_value(attrs: Mapping[str, Any]) -> str:
    if attrs.get("action") in ("store_true", "store_false"):
        return "flag"
    if attrs.get("choices"):
        return ", ".join(f"`{choice}`" for choice in attrs["choices"])
    return f"`{attrs.get('metavar') or 'VALUE'}`"


def _option_default(attrs: Mapping[str, Any]) -> str:
    default = attrs.get("default")
    if attrs.get("action") in ("store_true", "store_false") or default is None:
        return ""
    return f"`{default}`"


def options_page() -> str:
    """The command-line and ini options, as the plugin's ``pytest_addoption`` declares them."""
    from pytest_segrobust import plugin

    recorder = OptionRecorder()
    plugin.pytest_addoption(recorder)  # type: ignore[arg-type]
    rows = [
        (" ".join(f"`{n}`" for n in names), _option_value(attrs), _option_default(attrs), attrs.get("help", "").replace("%%", "%"))
        for names, attrs in recorder.options
    ]
    ini_rows = [(f"`{name}`", f"`{default}`", text) for name, text, default in recorder.ini]
    return "\n".join(
        [
            "# Command-line and ini options",
            "",
            "Generated from the plugin's `pytest_addoption` (and each registered backend's options) at every build.",
            "",
            "## Command line",
            "",
            *_table(("option", "value", "default", "what it does"), rows),
            "",
            "## Ini file",
            "",
            "Set in `pytest.ini`, `pyproject.toml` (`[tool.pytest.ini_options]`), `tox.ini` or `setup.cfg`.",
            "",
            *_table(("name", "default", "what it sets"), ini_rows),
            "",
        ]
    )


def gallery_pictures() -> dict[str, bytes]:
    """Each preset's gallery drawn by ``segrobust gallery``: image presets on the demo's first image,
    acoustic ones as spectrograms of the demo's first sound.

    A corruption already drawn for an earlier preset with the same severity table is not drawn
    again, nor is one that needs an optional extra (the build needs none), nor one in
    :data:`NOT_DRAWN`.
    """
    import numpy as np
    from PIL import Image

    from pytest_segrobust import cli
    from pytest_segrobust.core.types import Audio
    from pytest_segrobust.core.types import Image as ImageField
    from pytest_segrobust.corruptions import DEFAULT_PRESET, REGISTRY
    from pytest_segrobust.data.demo import demo_dataset

    pictures: dict[str, bytes] = {}
    drawn: list[tuple[str, object]] = []
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        image = work / "demo-val-0.png"
        Image.fromarray(np.ascontiguousarray(demo_dataset("val")[0].image.permute(1, 2, 0).numpy())).save(image)
        # The default preset first: the others' pictures show only what it does not.
        for preset in sorted(REGISTRY.presets(), key=lambda name: name != DEFAULT_PRESET):
            corruptions = REGISTRY.available(preset)
            if all(c.accepts(ImageField) for c in corruptions):
                argv = ["gallery", str(image)]
            elif all(c.accepts(Audio) for c in corruptions):
                argv = ["gallery"]
            else:
                continue  # a preset of clips (temporal): a still picture cannot show it
            chosen = [
                c.name
                for c in corruptions
                if not c.requires and c.name not in NOT_DRAWN and (c.name, c.table) not in drawn
            ]
            if not chosen:
                continue
            drawn += [(c.name, c.table) for c in corruptions if c.name in chosen]
            out = work / f"{preset}.png"
            command = [*argv, "--preset", preset, "--corruptions", *chosen, "--size", str(GALLERY_TILE), "--out", str(out)]
            with contextlib.redirect_stdout(io.StringIO()):
                status = cli.main(command)
            if status != 0:
                raise RuntimeError(f"segrobust {' '.join(command)} exited with {status}")
            pictures[preset] = out.read_bytes()
    return pictures


def catalogue_page(galleries: set[str]) -> str:
    """Every family of what a suite may name, with its severity tables: ``segrobust list`` as a page."""
    from pytest_segrobust.corruptions import REGISTRY
    from pytest_segrobust.suite.catalogue import catalogue
    from pytest_segrobust.text.registry import TextPerturbationRegistry

    lines = [
        "# Perturbation catalogue",
        "",
        "Generated at every build from `pytest_segrobust/suite/catalogue.py`, the code behind `segrobust list`;",
        "the pictures are drawn by `segrobust gallery` on the first image (or sound) of the embedded demo, each",
        "perturbation once (where a later preset has the same table, its picture is the earlier preset's); frost and",
        "the perturbations that need an optional extra are left out of them (`segrobust gallery` draws those).",
        "What the families mean: [Perturbations](../explanation/perturbations.md).",
        "",
    ]
    shown: set[str] = set()
    for family in catalogue(REGISTRY, TextPerturbationRegistry.builtin()):
        lines += [f"## Family `{family.name}`", "", _cell(family.heading), ""]
        for group in family.groups:
            lines += [f"### {'Suite key' if family.suite_key else 'Preset'} `{group.name}`", "", _cell(group.heading), ""]
            lines += [f"* {_cell(detail)}" for detail in group.details]
            if group.details:
                lines.append("")
            if group.name in galleries and group.name not in shown:
                shown.add(group.name)
                lines += [f"![{group.name} at severities 1, 3, 5](gallery/{group.name}.png)", ""]
            if group.entries:
                rows = [
                    (f"`{entry.name}`", ", ".join(entry.tags), *entry.rows) for entry in group.entries
                ]
                header = ("name", "tags", *(f"s{level}" for level in range(1, len(group.entries[0].rows) + 1)))
                lines += [*_table(header, rows), ""]
                described = [entry for entry in group.entries if entry.level or entry.description]
                lines += [
                    f"* `{entry.name}`: {_cell(' '.join(p for p in (entry.description, entry.level) if p))}"
                    for entry in described
                ]
                if described:
                    lines.append("")
    return "\n".join(lines)
