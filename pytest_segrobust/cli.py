"""The ``segrobust`` command: inspect the corruption catalogue."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pytest_segrobust.corruptions import DEFAULT_PRESET, PRESETS, REGISTRY
from pytest_segrobust.errors import SegRobustError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="segrobust", description="Segmentation robustness gate for pytest.")
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="list corruptions and presets with their severity parameters")
    listing.add_argument("--preset", default=None, help="only this preset (default: every preset)")
    args = parser.parse_args(argv)
    try:
        REGISTRY.load_entry_points()
        return _list(args.preset)
    except SegRobustError as exc:
        print(f"segrobust: error: {exc}", file=sys.stderr)
        return 2


def _list(only: str | None) -> int:
    presets = [only] if only else REGISTRY.presets()
    for name in presets:
        available = REGISTRY.available(name)  # raises for an unknown preset
        preset = PRESETS.get(name)
        default = " (default)" if name == DEFAULT_PRESET else ""
        print(f"preset {name}{default}: {preset.description if preset else ''}")
        for corruption in available:
            print(f"  {corruption.name}  [{corruption.category.value}, {'geometric' if corruption.geometric else 'photometric'}]")
            for severity, row in enumerate(corruption.table.describe(), start=1):
                print(f"    s{severity}: {row}")
        missing = [n for n in (preset.corruption_names if preset else ()) if n not in {c.name for c in available}]
        if missing:
            print(f"  not implemented yet: {', '.join(missing)}")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
