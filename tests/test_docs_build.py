"""The documentation site builds in strict mode (a broken link, anchor or reference fails), its generated
reference names everything the code declares, and a browser renders its pages.

The site is built once per module, in-process, into a temporary folder: ``mkdocs build --strict``.
The browser check runs headless Chromium (``scripts/check_html_report.py`` finds it); without one it
skips, saying why, except in CI (``SEGROBUST_CI=1``, set by ``.ci/run``), where it fails.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Material's indigo header, as the screenshot shows it (mkdocs.yml: theme.palette.primary).
HEADER_RGB = (64, 81, 181)
WINDOW = (1280, 800)


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built from ``mkdocs.yml`` with ``--strict``: any warning aborts the build."""
    pytest.importorskip("mkdocs", reason="the docs need the docs extra: pip install -e '.[docs]'")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    out = tmp_path_factory.mktemp("site")
    config = load_config(config_file=str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(out))
    build(config)  # raises mkdocs.exceptions.Abort on the first warning in strict mode
    return out


def test_the_configuration_is_strict_about_links() -> None:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^strict: true$", text, re.MULTILINE)
    for check in ("omitted_files", "absolute_links", "unrecognized_links", "anchors"):
        assert re.search(rf"^  {check}: warn$", text, re.MULTILINE), check


@pytest.mark.parametrize("link", ["[a page](missing.md)", "[a heading](#no-such-heading)"])
def test_a_broken_link_fails_the_build(link: str, tmp_path: Path) -> None:
    """The site's own link checks, on a one-page site: what the real build would refuse."""
    pytest.importorskip("mkdocs", reason="the docs need the docs extra: pip install -e '.[docs]'")
    import yaml
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    ours = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(f"# Home\n\nSee {link}.\n", encoding="utf-8")
    config = {key: ours[key] for key in ("strict", "validation", "markdown_extensions")}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump({"site_name": "t", **config}), encoding="utf-8")
    with pytest.raises(Abort):
        build(load_config(config_file=str(tmp_path / "mkdocs.yml"), site_dir=str(tmp_path / "site")))


def test_every_page_of_the_navigation_is_built(site: Path) -> None:
    listed = re.findall(r"^\s*(?:- )?(?:[^:#\n]+: )?([\w/.-]+\.md)$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.MULTILINE)
    assert len(listed) > 30
    for page in listed:
        built = site / ("index.html" if page == "index.md" else page.removesuffix(".md").removesuffix("/index") + "/index.html")
        assert built.is_file(), page


def test_the_reference_names_every_suite_key(site: Path) -> None:
    from pytest_segrobust.suite.schema import SUITE_KEYS
    from pytest_segrobust.tasks import TASKS, get_task

    page = (site / "reference" / "suite-fields" / "index.html").read_text(encoding="utf-8")
    keys = {key.name for key in SUITE_KEYS} | {key for name in TASKS.names() for key in get_task(name).suite_keys}
    assert {"batch_size", "gate", "require", "temporal", "acoustic", "text_replay"} <= keys
    assert [key for key in sorted(keys) if f"<code>{key}</code>" not in page] == []
    for nested in ("tolerance.gamma_r", "gate.confidence", "gate.inconclusive", "cd.noise_severities", "shifts.splits"):
        assert f"<code>{nested}</code>" in page, nested


def test_the_reference_names_every_option_and_command(site: Path) -> None:
    sources = [ROOT / "pytest_segrobust" / "plugin.py", *(ROOT / "pytest_segrobust" / "backends").glob("*.py")]
    declared = {flag for source in sources for flag in re.findall(r'"(--segrobust[\w-]*)"', source.read_text(encoding="utf-8"))}
    assert {"--segrobust", "--segrobust-update-baselines", "--segrobust-backend", "--segrobust-ray-address"} <= declared
    options = (site / "reference" / "options" / "index.html").read_text(encoding="utf-8")
    assert [flag for flag in sorted(declared) if f"<code>{flag}</code>" not in options] == []
    assert "<code>segrobust_suites</code>" in options and "<code>segrobust_threads</code>" in options
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("list", "gallery", "merge", "calibrate", "convert-refs"):
        assert f"segrobust {command}" in cli, command


def test_the_catalogue_shows_every_family_with_pictures(site: Path) -> None:
    from pytest_segrobust.corruptions import REGISTRY
    from pytest_segrobust.text.registry import TextPerturbationRegistry

    page = (site / "reference" / "catalogue" / "index.html").read_text(encoding="utf-8")
    names = {c.name for preset in REGISTRY.presets() for c in REGISTRY.available(preset)}
    names |= set(TextPerturbationRegistry.builtin().names())
    assert [name for name in sorted(names) if f"<code>{name}</code>" not in page] == []
    pictures = sorted((site / "reference" / "gallery").glob("*.png"))
    assert {p.stem for p in pictures} >= {"coco-p", "avs-acoustic"}
    assert all(f"gallery/{p.name}" in page for p in pictures)
    assert sum(p.stat().st_size for p in pictures) < 2_000_000  # small pages


@pytest.fixture(scope="module")
def browser() -> str:
    """Chromium or Chrome; in CI (``SEGROBUST_CI=1``) a missing browser fails instead of skipping."""
    found = _script("check_html_report").find_browser()
    if found is None:
        message = "no Chromium or Chrome on PATH (apt-get install chromium, or set SEGROBUST_BROWSER)"
        if os.environ.get("SEGROBUST_CI") == "1":
            pytest.fail(f"SEGROBUST_CI=1 and {message}")
        pytest.skip(message)
    return found


@pytest.mark.parametrize(
    ("page", "title"),
    [("index.html", "pytest-segrobust"), ("tutorials/semantic/index.html", "Semantic segmentation")],
)
def test_a_browser_renders_the_page(site: Path, browser: str, page: str, title: str, tmp_path: Path) -> None:
    from PIL import Image

    check = _script("check_html_report")
    shot = tmp_path / "page.png"
    check.screenshot(browser, site / page, shot, WINDOW, tmp_path, timeout=120)
    facts, failures = check.judge_screenshot(shot, WINDOW)
    assert failures == [], facts
    with Image.open(shot) as image:
        header = image.convert("RGB").crop((0, 0, WINDOW[0], 40))
        colours = header.getcolors(maxcolors=WINDOW[0] * 40) or []
    share = sum(count for count, rgb in colours if max(abs(a - b) for a, b in zip(rgb, HEADER_RGB)) <= 8) / (WINDOW[0] * 40)
    assert share > 0.8, f"the header is not the theme's colour {HEADER_RGB} ({share:.0%} of it is)"
    dom = check._browser(browser, tmp_path / "profile-dom", "--dump-dom", (site / page).resolve().as_uri(), timeout=120)
    assert f"<title>{title}" in dom.stdout
    assert f">{title}</h1>" in dom.stdout or f">{title}<a" in dom.stdout


def test_ci_installs_a_browser_and_never_skips_the_check() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "export SEGROBUST_CI=1" in ci
    installs = [line for line in ci if "apt-get install" in line and "chromium" in line.split()]
    assert installs, "no apt-get install of chromium in .ci/run"
    first_test = next(i for i, line in enumerate(ci) if line.strip().startswith("pytest -n"))
    assert ci.index("export SEGROBUST_CI=1") < first_test
