"""NamedRegistry: names are unique, a re-imported definition replaces itself."""

from __future__ import annotations

import pytest

from pytest_segrobust.core.errors import UnknownNameError
from pytest_segrobust.core.registry import InstanceRegistry, NamedRegistry


def make(module: str) -> type:
    return type("Thing", (), {"name": "thing", "__module__": module})


def test_another_definition_under_a_taken_name_is_refused() -> None:
    registry: NamedRegistry = NamedRegistry("thing", "segrobust.test-things", ())
    registry.register(make("package.a"))
    with pytest.raises(ValueError, match="thing 'thing' is already registered \\(package.a.Thing\\)"):
        registry.register(make("package.b"))


def test_the_same_definition_imported_again_replaces_its_earlier_self() -> None:
    registry: NamedRegistry = NamedRegistry("thing", "segrobust.test-things", ())
    first, again = make("package.a"), make("package.a")
    registry.register(first)
    registry.register(again)  # as when pytester's in-process run unloads and re-imports the module
    assert registry.get("thing") is again


def test_an_unknown_name_lists_the_known_ones() -> None:
    registry: NamedRegistry = NamedRegistry("thing", "segrobust.test-things", ())
    registry.register(make("package.a"))
    with pytest.raises(UnknownNameError, match="unknown thing 'other'; known: thing"):
        registry.get("other")


def test_an_instance_registry_holds_an_instance_of_each_registered_class() -> None:
    registry: InstanceRegistry = InstanceRegistry("thing", "segrobust.test-things", ())
    thing = make("package.a")
    assert registry.register_class(thing) is thing  # a class decorator hands the class back
    assert type(registry.get("thing")) is thing
    with pytest.raises(ValueError, match="thing 'thing' is already registered \\(package.a.Thing\\)"):
        registry.register_class(make("package.b"))
