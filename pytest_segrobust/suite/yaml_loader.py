"""The one way the project reads YAML: PyYAML's safe loader, refusing a key written twice.

YAML itself keeps the last of two equal keys in a mapping, silently: a second ``require:``
block pasted below the first replaced the release policy without a word, a second
``corruptions:`` list left the first one's cells unrun, and a repeated key inside a flow
mapping (``{name: a, factory: f, name: b}``) renamed a model. Here a mapping that repeats a
key, at any depth, in block or flow style, is refused at composition, naming both lines.

Merge keys keep YAML's meaning: ``<<: *defaults`` copies the keys of ``defaults`` that the
mapping does not write itself, so a key written beside the merge overrides the merged one on
purpose and is not a duplicate. Two ``<<`` keys in one mapping are (merge a list instead:
``<<: [*a, *b]``).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode

__all__ = ["DuplicateKeyError", "UniqueKeyLoader", "compose_yaml", "load_yaml"]


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping writes the same key twice; ``problem_mark`` is the second, the problem names the first."""


class UniqueKeyLoader(yaml.SafeLoader):
    """:class:`yaml.SafeLoader` that raises :class:`DuplicateKeyError` for a key repeated in one mapping."""

    def compose_mapping_node(self, anchor: str | None) -> MappingNode:
        node: MappingNode = super().compose_mapping_node(anchor)  # type: ignore[no-untyped-call]
        # Checked on the composed node, before the constructor flattens merge keys into it:
        # what is compared is what the file writes.
        seen: dict[Any, ScalarNode] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode):
                continue  # a sequence or mapping as a key: no suite field, and refused where it is read
            key = _key_of(self, key_node)
            first = seen.setdefault(key, key_node)
            if first is not key_node:
                raise DuplicateKeyError(
                    "while reading a mapping",
                    node.start_mark,
                    f"duplicate key {key_node.value!r} at {_places(first.start_mark, key_node.start_mark)}: "
                    "YAML would keep only the last; write each key once",
                    key_node.start_mark,
                )
        return node


def _places(first: yaml.Mark, second: yaml.Mark) -> str:
    """``lines 3 and 12``, or ``line 4, columns 9 and 27`` for two keys of one flow mapping on one line."""
    if first.line == second.line:
        return f"line {first.line + 1}, columns {first.column + 1} and {second.column + 1}"
    return f"lines {first.line + 1} and {second.line + 1}"


def _key_of(loader: UniqueKeyLoader, node: ScalarNode) -> Any:
    """What a scalar key means once constructed (``yes`` and ``true`` are one key; ``1`` and ``'1'`` two)."""
    if node.tag == "tag:yaml.org,2002:merge":
        return ("<<",)  # not a value a document can write otherwise
    try:
        value = loader.construct_object(node)  # type: ignore[no-untyped-call]
    except yaml.YAMLError:
        return (node.tag, node.value)  # the constructor refuses it again, where it is read
    try:
        hash(value)
    except TypeError:
        return (node.tag, node.value)
    return (type(value) is bool, value)  # True == 1 in Python; not as YAML keys


def load_yaml(text: str) -> Any:
    """The document in ``text``, as :func:`yaml.safe_load` reads it, refusing repeated keys.

    Raises:
        yaml.YAMLError: for text that is not YAML, and :class:`DuplicateKeyError` for a repeated key.
    """
    return yaml.load(text, Loader=UniqueKeyLoader)  # UniqueKeyLoader is a SafeLoader: it builds no Python object


def compose_yaml(text: str) -> yaml.Node | None:
    """The node tree of ``text`` (with each node's line), refusing repeated keys as :func:`load_yaml` does."""
    return yaml.compose(text, Loader=UniqueKeyLoader)
