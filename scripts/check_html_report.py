"""Open an HTML report in headless Chromium, check what it rendered, and take a screenshot.

    python scripts/check_html_report.py segrobust-report.html [--screenshot shot.png]

Two browser runs on the page:

1. ``--dump-dom`` on a copy of the page with a probe script added: once the page has loaded,
   the probe counts the tables (and the sortable ones), counts the images and how many were
   decoded (``naturalWidth > 0``) from ``data:`` URIs, lists any resource fetched from
   elsewhere and any script error, clicks the header of a numeric column to check that the
   rows come out sorted both ways, and writes all that as JSON into the DOM, which Chromium
   prints.
2. ``--screenshot`` of the page itself, which must be a PNG of the window's size that is not
   blank.

Prints one JSON summary and exits 0 when every check passed, 1 when one failed (each failure
named), 2 on a usage error, and 77 (the conventional "skipped") when no Chromium or Chrome is
found: install one (``apt-get install chromium``) or name it with ``--browser``.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SKIPPED = 77
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
PROBE_ID = "segrobust-browser-check"

# Runs before the page's own scripts (it goes first in <head>) so it sees their errors, and
# reports after the load event, when every image has been decoded or has failed.
_PROBE = """
<script>
(() => {
  const errors = [];
  window.addEventListener("error", (event) => errors.push(String(event.message || event.type)));
  const textOf = (table, column) => Array.from(table.tBodies[0].rows, (row) => row.cells[column].textContent.trim());
  const numbers = (texts) => texts.filter((t) => !["", "\\u2013", "-", "\\u2014"].includes(t))
    .map((t) => parseFloat(t.replace("\\u2212", "-").replace(/^\\+/, "")));
  const ordered = (values, sign) => values.every((v, i) => i === 0 || sign * (v - values[i - 1]) >= 0);
  const checkSorting = () => {
    for (const table of document.querySelectorAll("table.sortable")) {
      if (!table.tBodies[0] || table.tBodies[0].rows.length < 2) continue;
      const headers = Array.from(table.tHead.rows[0].cells);
      for (let column = 0; column < headers.length; column++) {
        const values = numbers(textOf(table, column));
        if (values.length < 2 || values.some(Number.isNaN) || new Set(values).size < 2) continue;
        headers[column].click();
        const ascending = ordered(numbers(textOf(table, column)), 1);
        headers[column].click();
        const descending = ordered(numbers(textOf(table, column)), -1);
        const heading = table.closest(".scroll")?.previousElementSibling?.textContent ?? "";
        return { table: heading, column: headers[column].textContent, rows: values.length, ascending, descending };
      }
    }
    return null;
  };
  window.addEventListener("load", () => {
    const images = Array.from(document.images);
    const tables = Array.from(document.querySelectorAll("table"));
    const result = {
      title: document.title,
      tables: tables.length,
      sortable_tables: document.querySelectorAll("table.sortable").length,
      table_rows: tables.reduce((n, t) => n + Array.from(t.tBodies).reduce((m, b) => m + b.rows.length, 0), 0),
      images: images.length,
      images_embedded: images.filter((i) => i.src.startsWith("data:")).length,
      images_decoded: images.filter((i) => i.complete && i.naturalWidth > 0).length,
      image_sizes: images.map((i) => [i.naturalWidth, i.naturalHeight]),
      external_resources: performance.getEntriesByType("resource").map((e) => e.name)
        .filter((name) => !name.startsWith("data:")),
      page_height: document.documentElement.scrollHeight,
      sorting: checkSorting(),
      errors,
    };
    const out = document.createElement("pre");
    out.id = "%s";
    out.textContent = JSON.stringify(result);
    document.body.appendChild(out);
  });
})();
</script>
""" % PROBE_ID


class CheckError(Exception):
    """The browser could not be run or said nothing usable."""


def find_browser(named: str | None = None) -> str | None:
    """The browser to use: ``named``, else ``$SEGROBUST_BROWSER``, else the first Chromium or Chrome on PATH."""
    for candidate in (named, os.environ.get("SEGROBUST_BROWSER")):
        if candidate:
            return shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def _browser(browser: str, profile: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    command = [
        browser,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",  # a fresh profile: no lock shared with another run
        *(["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),  # root has no sandbox
        *args,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CheckError(f"{browser} did not finish within {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise CheckError(f"{browser} exited with {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done


def probe(browser: str, page: Path, width: int, workdir: Path, timeout: float) -> dict[str, Any]:
    """What the page rendered in a window ``width`` wide, as the probe script measured it."""
    text = page.read_text(encoding="utf-8")
    head = re.search(r"<head[^>]*>", text, re.IGNORECASE)
    if head is None:
        raise CheckError(f"{page} has no <head>")
    probed = workdir / page.name  # beside nothing: every image must come from the page itself
    probed.write_text(text[: head.end()] + _PROBE + text[head.end() :], encoding="utf-8")
    done = _browser(
        browser,
        workdir / "profile-probe",
        "--virtual-time-budget=10000",
        # The screenshot's width, so that the page height measured here is the screenshot's.
        f"--window-size={width},800",
        "--dump-dom",
        probed.as_uri(),
        timeout=timeout,
    )
    found = re.search(rf'<pre id="{PROBE_ID}">(.*?)</pre>', done.stdout, re.DOTALL)
    if found is None:
        raise CheckError(f"the probe reported nothing (did the page finish loading?); stderr: {done.stderr[-1000:]}")
    return json.loads(html.unescape(found.group(1)))


def screenshot(browser: str, page: Path, out: Path, size: tuple[int, int], workdir: Path, timeout: float) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    _browser(
        browser,
        workdir / "profile-shot",
        "--virtual-time-budget=10000",
        "--run-all-compositor-stages-before-draw",
        f"--window-size={size[0]},{size[1]}",
        f"--screenshot={out.resolve()}",
        page.resolve().as_uri(),
        timeout=timeout,
    )


def judge_probe(result: dict[str, Any], min_tables: int, min_images: int) -> list[str]:
    """Every way the measured page falls short, one line each."""
    failures = []
    if result["tables"] < min_tables:
        failures.append(f"{result['tables']} tables rendered, expected at least {min_tables}")
    if result["sortable_tables"] != result["tables"]:
        failures.append(f"only {result['sortable_tables']} of {result['tables']} tables are sortable")
    if result["images"] < min_images:
        failures.append(f"{result['images']} images on the page, expected at least {min_images}")
    if result["images_decoded"] != result["images"]:
        failures.append(f"only {result['images_decoded']} of {result['images']} images decoded")
    if result["images_embedded"] != result["images"]:
        failures.append(f"only {result['images_embedded']} of {result['images']} images are embedded data: URIs")
    if result["external_resources"]:
        failures.append(f"the page fetched resources from elsewhere: {result['external_resources']}")
    if result["errors"]:
        failures.append(f"script errors: {result['errors']}")
    sorting = result["sorting"]
    if result["table_rows"] >= 2 and sorting is None:
        failures.append("no numeric column to check sorting on")
    elif sorting is not None and not (sorting["ascending"] and sorting["descending"]):
        failures.append(f"clicking a header did not sort the rows: {sorting}")
    return failures


def judge_screenshot(path: Path, size: tuple[int, int]) -> tuple[dict[str, Any], list[str]]:
    """The screenshot's size and how much of it is not background; failures if blank or missing."""
    if not path.is_file() or path.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
        return {}, [f"no PNG screenshot at {path}"]
    try:
        from PIL import Image
    except ImportError:  # the size and the signature are all we can check without Pillow
        return {"path": str(path)}, []
    with Image.open(path) as image:
        gray = image.convert("L")
        inked = sum(count for level, count in enumerate(gray.histogram()) if level < 200)
        inked_fraction = round(inked / (gray.width * gray.height), 4)
        facts = {"path": str(path), "size": list(image.size), "inked_fraction": inked_fraction}
    failures = []
    if tuple(facts["size"]) != size:
        failures.append(f"screenshot is {facts['size']}, expected {list(size)}")
    if facts["inked_fraction"] < 0.01:
        failures.append(f"screenshot is blank ({facts['inked_fraction']:.2%} of it is not background)")
    return facts, failures


def _size(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)[,x](\d+)", text.strip())
    if match is None or 0 in (int(match[1]), int(match[2])):
        raise argparse.ArgumentTypeError(f"expected WIDTH,HEIGHT such as 1280,1600; got {text!r}")
    return int(match[1]), int(match[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path, help="the report's .html file")
    parser.add_argument("--screenshot", type=Path, help="where the PNG goes (default: <page>-screenshot.png beside it)")
    parser.add_argument("--window-size", type=_size, default=(1280, 1600), metavar="W,H", help="default 1280,1600")
    parser.add_argument("--full-page", action="store_true", help="make the window as tall as the page (up to 16000)")
    parser.add_argument("--browser", help="Chromium or Chrome executable (default: $SEGROBUST_BROWSER, then PATH)")
    parser.add_argument("--min-tables", type=int, default=1, metavar="N", help="fail below N tables (default 1)")
    parser.add_argument("--min-images", type=int, default=0, metavar="N", help="fail below N images (default 0)")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="per browser run (default 120)")
    args = parser.parse_args(argv)
    if not args.page.is_file():
        parser.error(f"{args.page} is not a file")
    browser = find_browser(args.browser)
    if browser is None:
        wanted = args.browser or os.environ.get("SEGROBUST_BROWSER") or " / ".join(BROWSERS)
        print(f"skipped: no browser found ({wanted}); install Chromium (apt-get install chromium) or pass --browser",
              file=sys.stderr)
        return SKIPPED
    shot = args.screenshot or args.page.with_name(f"{args.page.stem}-screenshot.png")
    summary: dict[str, Any] = {"page": str(args.page), "browser": browser}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="segrobust-browser-") as tmp:
        workdir = Path(tmp)
        try:
            started = time.perf_counter()
            result = probe(browser, args.page, args.window_size[0], workdir, args.timeout)
            summary["probe_seconds"] = round(time.perf_counter() - started, 2)
            failures += judge_probe(result, args.min_tables, args.min_images)
            width, height = args.window_size
            size = (width, min(max(result["page_height"], 1), 16000)) if args.full_page else (width, height)
            started = time.perf_counter()
            screenshot(browser, args.page, shot, size, workdir, args.timeout)
            summary["screenshot_seconds"] = round(time.perf_counter() - started, 2)
        except CheckError as exc:
            summary["failures"] = [str(exc)]
            print(json.dumps(summary, indent=2))
            return 1
    shot_facts, shot_failures = judge_screenshot(shot, size)
    summary |= {"rendered": result, "screenshot": shot_facts, "failures": failures + shot_failures}
    print(json.dumps(summary, indent=2))
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
