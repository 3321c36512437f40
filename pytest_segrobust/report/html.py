"""The report as one self-contained HTML page: sortable tables, figures embedded, no network.

The page says what the markdown says, in its order: it follows :func:`render_markdown`
heading by heading, so whatever the markdown gains (a verdict at the top, run facts, a new
table or figure) appears here without this module knowing it. Where a heading is one of
:func:`suite_sections`' tables or figures, the typed section is rendered instead of its
markdown: cells are never re-parsed from pipes. Figures are embedded as ``data:`` URIs, CSS
and a small table sorter are inline, so the single file can be mailed, attached to a CI
run or opened offline. Every text is escaped.

The embedded images have a budget (:data:`EMBEDDED_BYTES`): each figure is embedded no wider
than the page shows it (:data:`EMBEDDED_WIDTH`), a photograph (many colours) as JPEG; in page
order, a figure that no longer fits the budget is a link to its file in the report's figures
folder instead, and the top of the page names the linked ones.
"""

from __future__ import annotations

import base64
import html
import io
import mimetypes
import re
import urllib.parse
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image as PILImage

from pytest_segrobust.core.files import atomic_write_text
from pytest_segrobust.report import Figure, Report, RunVerdict, SuiteReport, render_markdown, suite_sections, verdict
from pytest_segrobust.report.paths import report_file
from pytest_segrobust.report.tables import STATUS_MARK, Table

# A cell whose whole text is a status (or its mark in the tables) is coloured by it.
_STATUS_OF_TEXT = {**{status: status for status in STATUS_MARK}, **{mark: s for s, mark in STATUS_MARK.items()}}
_ROW_STATUS_PRIORITY = ("error", "regressed", "improved", "new", "updated")
_NUMBER = re.compile(r"^[+\-\u2212]?(\d+\.?\d*|\.\d+)(e[+\-]?\d+)?%?$", re.IGNORECASE)
_MISSING = frozenset({"", "–", "-", "—"})
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*[-*]\s+(.*)$")
_IMAGE = re.compile(r"^!\[(.*?)\]\((.+?)\)$")
_SEPARATOR = re.compile(r"^:?-+:?$")

# Bytes of base64 image data the page embeds at most; figures past it are linked to their files.
EMBEDDED_BYTES = 3_000_000
# Widest an embedded figure is kept, in pixels: the page shows no figure wider (its body is 1280 px).
EMBEDDED_WIDTH = 1200
# A figure of at most this many bytes (and no wider) is embedded as written, without re-encoding.
_AS_WRITTEN = 150_000
# A figure with more colours than this is a photograph (embedded as JPEG); fewer, a plot (PNG).
_PLOT_COLOURS = 4096
_JPEG_QUALITY = 85

_CSS = """
:root { color-scheme: light; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --head: #f6f8fa;
  --stripe: #fafbfc; --red: #b42318; --red-bg: #fef3f2; --green: #067647; --green-bg: #ecfdf3;
  --amber: #b54708; --blue: #175cd3; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1280px; padding: 24px 32px 64px; color: var(--fg);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif; }
h1 { font-size: 26px; margin: 0 0 8px; }
h2 { font-size: 21px; margin: 40px 0 8px; padding-bottom: 6px; border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 28px 0 8px; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
  background: var(--head); padding: 1px 4px; border-radius: 4px; }
.meta, .note { color: var(--muted); }
.note { font-size: 12.5px; margin: 6px 0 0; max-width: 960px; }
nav.contents { font-size: 13px; margin: 4px 0 8px; display: flex; flex-wrap: wrap; gap: 2px 16px; }
nav.contents a { color: var(--blue); text-decoration: none; white-space: nowrap; }
nav.contents a:hover { text-decoration: underline; }
nav.top { font-size: 14px; margin-bottom: 16px; }
h2 code { font-size: 18px; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 4px 0; }
th, td { border: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: var(--head); font-weight: 600; }
tbody tr:nth-child(even) { background: var(--stripe); }
td.num { text-align: right; white-space: nowrap; }
table.sortable th { cursor: pointer; user-select: none; padding-right: 22px; position: relative; }
table.sortable th::after { content: "\\2195"; position: absolute; right: 6px; color: #9aa4ae; font-size: 11px; }
table.sortable th[aria-sort="ascending"]::after { content: "\\25B2"; color: var(--fg); }
table.sortable th[aria-sort="descending"]::after { content: "\\25BC"; color: var(--fg); }
table.sortable th:focus-visible { outline: 2px solid var(--blue); outline-offset: -2px; }
tr.row-regressed, tr.row-error { background: var(--red-bg) !important; }
tr.row-improved { background: var(--green-bg) !important; }
.status-regressed, .status-error { color: var(--red); font-weight: 600; }
.status-improved { color: var(--green); font-weight: 600; }
.status-passed { color: var(--green); }
.status-new { color: var(--amber); }
.status-updated { color: var(--blue); }
blockquote { margin: 12px 0; padding: 2px 14px; border-left: 4px solid var(--amber); background: #fffaeb; }
figure { margin: 8px 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); background: #fff; }
figcaption { color: var(--muted); font-size: 12.5px; }
figure.linked { padding: 6px 10px; border: 1px dashed var(--line); }
.missing-figure { color: var(--red); }
.verdict { display: flex; align-items: baseline; flex-wrap: wrap; gap: 4px 14px; margin: 12px 0 16px;
  padding: 14px 20px; border-radius: 8px; border: 2px solid; border-left-width: 12px; font-size: 17px; }
.verdict-icon { font-size: 30px; line-height: 1; font-weight: 700; }
.verdict-word { font-size: 30px; line-height: 1; font-weight: 800; letter-spacing: 0.04em; }
.verdict-pass { color: var(--green); background: var(--green-bg); border-color: var(--green); }
.verdict-fail { color: var(--red); background: var(--red-bg); border-color: var(--red); }
.verdict-counts { color: var(--fg); font-weight: 600; }
"""

# Click (or Enter/Space on) a header to sort by its column; again to reverse. Numbers sort as
# numbers (a leading +, a unicode minus and a trailing % are understood), empty and "–" cells
# last in both directions, the rest in natural order; ties keep their original order.
_SORTER = """
(() => {
  const MISSING = new Set(["", "\\u2013", "-", "\\u2014"]);
  const NUMBER = /^[+\\-\\u2212]?(\\d+\\.?\\d*|\\.\\d+)(e[+\\-]?\\d+)?%?$/i;
  const key = (cell) => {
    const text = (cell ? cell.textContent : "").trim();
    if (MISSING.has(text)) return null;
    if (NUMBER.test(text)) return parseFloat(text.replace("\\u2212", "-").replace(/^\\+/, ""));
    return text;
  };
  const compare = (a, b) => {
    if (typeof a === "number" && typeof b === "number") return a - b;
    if (typeof a === "number") return -1;
    if (typeof b === "number") return 1;
    return a.localeCompare(b, undefined, { numeric: true, sensitivity: "base" });
  };
  for (const table of document.querySelectorAll("table.sortable")) {
    const body = table.tBodies[0];
    if (!table.tHead || !body) continue;
    Array.from(body.rows).forEach((row, index) => { row.dataset.order = index; });
    const headers = Array.from(table.tHead.rows[0].cells);
    headers.forEach((th, column) => {
      th.tabIndex = 0;
      th.title = "sort by this column";
      const sort = () => {
        const ascending = th.getAttribute("aria-sort") !== "ascending";
        for (const other of headers) other.removeAttribute("aria-sort");
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        const rows = Array.from(body.rows, (row) => ({ row, key: key(row.cells[column]), order: +row.dataset.order }));
        rows.sort((a, b) => {
          if (a.key === null || b.key === null) return (a.key === null) - (b.key === null) || a.order - b.order;
          return (ascending ? 1 : -1) * compare(a.key, b.key) || a.order - b.order;
        });
        for (const { row } of rows) body.appendChild(row);
      };
      th.addEventListener("click", sort);
      th.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sort(); }
      });
    });
  }
})();
"""


def html_path(base: Path) -> Path:
    """Where the HTML report of ``base`` goes: beside ``base.md``."""
    return report_file(base, ".html")


def write_html(report: Report, base: Path) -> Path:
    """Write ``base.html`` atomically, embedding the figures written beside it; returns its path.

    Call it with the report :func:`~pytest_segrobust.report.write_report` wrote, which names
    each suite's figures (:attr:`~pytest_segrobust.report.SuiteReport.figures`).

    Raises:
        WriteError: naming the path and why it could not be written.
    """
    path = html_path(base)
    atomic_write_text(path, render_html(report, base.parent))
    return path


@dataclass
class _Part:
    """One heading of the markdown and the lines under it (level 0: the lines before any heading)."""

    level: int
    title: str
    lines: list[str] = field(default_factory=list)
    section: Table | Figure | None = None  # the typed section this heading stands for
    anchor: str = ""
    suite: bool = False


def render_html(report: Report, figures_dir: Path, budget: int = EMBEDDED_BYTES) -> str:
    """The whole page.

    Args:
        report: As built by :func:`~pytest_segrobust.report.build_report` (and completed by
            ``write_report``, which names the figures).
        figures_dir: The folder figure file names are relative to (the report's folder).
        budget: Bytes of embedded image data (base64) the page may hold; figures past it are linked.
    """
    parts = _typed(_split(render_markdown(report)), report.suites)
    anchors = _Anchors()
    for part in parts:
        part.anchor = anchors.new(part.title) if part.level else ""
    title = next((p.title for p in parts if p.level == 1), "Segmentation robustness report")
    figures = _Figures(Path(figures_dir), budget)
    # The verdict, which the markdown gives as its first bold line, is the page's banner.
    run = verdict(report)
    verdict_part = next((p for p in parts if p.level <= 1 and f"**{run.line()}**" in p.lines), None)
    if verdict_part is not None:
        verdict_part.lines.remove(f"**{run.line()}**")
        title = f"{'PASS' if run.passed else 'FAIL'} · {title}"
    body: list[str] = []
    top = 0  # where the note on linked figures goes: under the title's contents
    for index, part in enumerate(parts):
        if part.level:
            body.append(f'<h{part.level} id="{part.anchor}">{_inline(part.title)}</h{part.level}>')
        if part is verdict_part:
            body.append(_verdict_banner(run))
        if part.level == 1:
            body.append(_contents(list(_outline(parts[index + 1 :])), "contents top"))
            top = len(body)
        if part.section is not None:
            body.append(_section(part.section, figures))
        else:
            body += _blocks(part.lines, figures, intro=part.suite)
        if part.suite:
            body.append(_contents(list(_until_next_suite(parts, index))))
    if figures.linked:
        body.insert(top, figures.note())
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            # Nothing on the page may reach the network: everything it shows is inline.
            (
                "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
                "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
            ),
            f"<title>{_text(_plain(title))}</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            "<body>",
            *body,
            f"<script>{_SORTER}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


def _verdict_banner(run: RunVerdict) -> str:
    """The verdict as the most visible thing on the page: colour, an icon and the word (the colour
    is never alone: the icon's shape and the word say it too, for readers who cannot tell red
    from green and for screen readers, which skip the icon and read the word)."""
    word, icon, kind = ("PASS", "✓", "pass") if run.passed else ("FAIL", "✗", "fail")
    counts = run.line().removeprefix(f"{word} · ")
    return (
        f'<p class="verdict verdict-{kind}"><span class="verdict-icon" aria-hidden="true">{icon}</span>'
        f'<strong class="verdict-word">{word}</strong><span class="verdict-counts">{_text(counts)}</span></p>'
    )


def _split(markdown: str) -> list[_Part]:
    parts = [_Part(0, "")]
    for line in markdown.splitlines():
        heading = _HEADING.match(line)
        if heading:
            parts.append(_Part(len(heading[1]), heading[2]))
        else:
            parts[-1].lines.append(line)
    return parts


def _typed(parts: list[_Part], suites: Mapping[str, SuiteReport]) -> list[_Part]:
    """Pair each suite's headings with its typed sections; typed sections the markdown lacks go last."""
    out: list[_Part] = []
    pending: deque[Table | Figure] = deque()
    waiting = deque(suites.items())

    def flush() -> None:
        while pending:
            section = pending.popleft()
            out.append(_Part(3, section.title, section=section))

    for part in parts:
        if part.level and part.level <= 2:
            if waiting and part.level == 2 and f"`{waiting[0][0]}`" in part.title:
                flush()
                part.suite = True
                pending.extend(suite_sections(waiting.popleft()[1]))
            elif part.level == 2:
                flush()
        elif part.level == 3 and pending:
            match = next((s for s in pending if s.title == part.title), None)
            if match is not None:
                # Earlier typed sections the markdown skipped keep their place before this one.
                while pending[0] is not match:
                    skipped = pending.popleft()
                    out.append(_Part(3, skipped.title, section=skipped))
                part.section = pending.popleft()
        out.append(part)
    flush()
    for name, suite in waiting:  # suites the markdown does not show under a heading of their own
        out.append(_Part(2, f"Suite `{name}`", suite=True))
        out += [_Part(3, section.title, section=section) for section in suite_sections(suite)]
    return out


def _outline(parts: Sequence[_Part]) -> Iterable[_Part]:
    """The page's contents: every level-2 heading, and the headings under none of the suites."""
    in_suite = False
    for part in parts:
        if part.level and part.level <= 2:
            in_suite = part.suite
        if part.level == 2 or (part.level > 2 and not in_suite):
            yield part


def _until_next_suite(parts: Sequence[_Part], index: int) -> Iterable[_Part]:
    for part in parts[index + 1 :]:
        if part.level and part.level <= 2:
            return
        if part.level == 3:
            yield part


def _contents(parts: Sequence[_Part], kind: str = "contents") -> str:
    if not parts:
        return ""
    links = "".join(f'<a href="#{p.anchor}">{_text(_plain(p.title))}</a>' for p in parts)
    return f'<nav class="{kind}">{links}</nav>'


def _blocks(lines: Sequence[str], figures: _Figures, intro: bool = False) -> list[str]:
    """The markdown the report uses: paragraphs, quotes, bullet lists, pipe tables, images, italic notes."""
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        if not line:
            index += 1
        elif line.startswith(">"):
            end = _run(lines, index, lambda text: text.startswith(">"))
            quoted = [re.sub(r"^>\s?", "", lines[i].strip()) for i in range(index, end)]
            out.append(f"<blockquote>{''.join(_blocks(quoted, figures))}</blockquote>")
            index = end
        elif line.startswith("|"):
            end = _run(lines, index, lambda text: text.startswith("|"))
            out.append(_markdown_table([lines[i].strip() for i in range(index, end)]))
            index = end
        elif _BULLET.match(line):
            end = _run(lines, index, lambda text: bool(_BULLET.match(text)))
            items = "".join(f"<li>{_inline(_BULLET.match(lines[i].strip())[1])}</li>" for i in range(index, end))
            out.append(f"<ul>{items}</ul>")
            index = end
        elif _IMAGE.match(line):
            image = _IMAGE.match(line)
            out.append(figures.figure(image[1], image[2]))
            index += 1
        else:
            end = _run(lines, index, lambda text: bool(text) and not _starts_block(text))
            text = " ".join(lines[i].strip() for i in range(index, max(end, index + 1)))
            index = max(end, index + 1)
            if len(text) > 2 and text[0] == text[-1] == "_":
                out.append(f'<p class="note">{_inline(text[1:-1])}</p>')
            else:
                out.append(f'<p class="meta">{_inline(text)}</p>' if intro else f"<p>{_inline(text)}</p>")
    return out


def _run(lines: Sequence[str], start: int, belongs: Any) -> int:
    end = start
    while end < len(lines) and belongs(lines[end].strip()):
        end += 1
    return end


def _starts_block(text: str) -> bool:
    return text.startswith(("|", ">")) or bool(_BULLET.match(text)) or bool(_IMAGE.match(text))


def _markdown_table(rows: Sequence[str]) -> str:
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    body = [row for row in cells[1:] if not all(_SEPARATOR.match(cell) for cell in row)]
    return _table(cells[0], body)


def _section(section: Any, figures: _Figures) -> str:
    # Tables and figures by their shape, so a new kind of section is shown rather than refused.
    if isinstance(section, Table) or (hasattr(section, "header") and hasattr(section, "rows")):
        return _table(section.header, section.rows, getattr(section, "note", ""))
    if isinstance(section, Figure) or hasattr(section, "file"):
        return figures.figure(str(getattr(section, "title", "")), str(section.file))
    return f"<p>{_text(str(section))}</p>"


def _table(header: Iterable[Any], rows: Iterable[Iterable[Any]], note: str = "") -> str:
    names = [str(h) for h in header]
    texts = [[str(c) for c in row] for row in rows]
    numeric = [bool(texts) and all(_is_number(row[i]) for row in texts if i < len(row)) for i in range(len(names))]
    head = "".join(f'<th scope="col">{_inline(h)}</th>' for h in names)
    lines = []
    for row in texts:
        statuses = {_STATUS_OF_TEXT.get(c) for c in row} - {None}
        row_status = next((s for s in _ROW_STATUS_PRIORITY if s in statuses), None)
        attrs = f' class="row-{row_status}"' if row_status else ""
        cells = "".join(_td(c, i < len(numeric) and numeric[i]) for i, c in enumerate(row))
        lines.append(f"<tr{attrs}>{cells}</tr>")
    out = (
        f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(lines)}</tbody></table></div>"
    )
    if note:
        out += f'<p class="note">{_inline(note)}</p>'
    return out


def _td(text: str, numeric: bool) -> str:
    classes = ["num"] if numeric else []
    status = _STATUS_OF_TEXT.get(text)
    if status is not None:
        classes.append(f"status-{status}")
    attrs = f' class="{" ".join(classes)}"' if classes else ""
    return f"<td{attrs}>{_inline(text)}</td>"


class _Figures:
    """The page's figures: each embedded while the budget lasts, in page order, else linked.

    Args:
        folder: The folder figure file names are relative to (the report's folder).
        budget: Bytes of base64 image data the page may embed.
    """

    def __init__(self, folder: Path, budget: int) -> None:
        self.folder = folder
        self.left = budget
        self.budget = budget
        self.linked: list[str] = []
        self.shown = 0

    def figure(self, title: str, file: str) -> str:
        path = self.folder / file
        self.shown += 1
        try:
            mime, data = embeddable(path)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            return f'<p class="missing-figure">Figure <code>{_text(path.name)}</code> not readable: {_text(reason)}</p>'
        encoded = base64.b64encode(data).decode("ascii")
        if len(encoded) > self.left:
            self.linked.append(file)
            return (
                f'<figure class="linked"><a href="{_text(urllib.parse.quote(file))}">{_text(title or path.name)}</a> '
                f'<span class="note">(linked, not embedded: the page\'s {_megabytes(self.budget)} of images are spent)</span>'
                f"<figcaption>{_text(file)}</figcaption></figure>"
            )
        self.left -= len(encoded)
        return (
            f'<figure><img src="data:{mime};base64,{encoded}" alt="{_text(title)}">'
            f"<figcaption>{_text(path.name)}</figcaption></figure>"
        )

    def note(self) -> str:
        """What the top of the page says when figures are linked: how many, which, and why."""
        names = ", ".join(f"<code>{_text(file)}</code>" for file in self.linked)
        return (
            f'<p class="note">{len(self.linked)} of {self.shown} figures are linked to their files beside this page, '
            f"not embedded, to keep its images within {_megabytes(self.budget)}: {names}.</p>"
        )


def embeddable(path: Path) -> tuple[str, bytes]:
    """A figure as the page embeds it (MIME type and bytes): no wider than :data:`EMBEDDED_WIDTH`,
    a photograph (many colours: a gallery, worst images) as JPEG, a plot as PNG. A small file, or
    one Pillow cannot read, is embedded as written.

    Raises:
        OSError: when the file cannot be read.
    """
    data = path.read_bytes()
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    try:
        with PILImage.open(io.BytesIO(data)) as opened:
            if opened.width <= EMBEDDED_WIDTH and len(data) <= _AS_WRITTEN:
                return mime, data
            image = opened.convert("RGB")
    except (OSError, ValueError, PILImage.DecompressionBombError):
        return mime, data
    if image.width > EMBEDDED_WIDTH:
        height = max(1, round(image.height * EMBEDDED_WIDTH / image.width))
        image = image.resize((EMBEDDED_WIDTH, height), PILImage.Resampling.LANCZOS)
    elif mime == "image/png" and image.getcolors(_PLOT_COLOURS) is not None:
        return mime, data  # a plot at its size: its PNG is as small as it gets
    encoded = io.BytesIO()
    if image.getcolors(_PLOT_COLOURS) is None:
        image.save(encoded, format="JPEG", quality=_JPEG_QUALITY)
        return "image/jpeg", encoded.getvalue()
    image.save(encoded, format="PNG")
    return "image/png", encoded.getvalue()


def _megabytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


def _is_number(text: str) -> bool:
    return text.strip() in _MISSING or bool(_NUMBER.match(text.strip()))


def _text(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _inline(text: str) -> str:
    """Escaped text with the markdown the report uses inline: `code`, **bold**, ``<br>`` in headers."""
    out = []
    for index, piece in enumerate(re.split(r"(`[^`]+`)", text)):
        if index % 2:
            out.append(f"<code>{_text(piece[1:-1])}</code>")
            continue
        escaped = _text(piece).replace("&lt;br&gt;", "<br>")
        out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped))
    return "".join(out)


def _plain(text: str) -> str:
    """Heading text without its markup, for links and the page title."""
    return text.replace("`", "").replace("**", "").replace("<br>", " ")


class _Anchors:
    """Unique, readable ``id`` values for headings."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def new(self, text: str) -> str:
        slug = re.sub(r"[\W_]+", "-", text.lower()).strip("-") or "section"
        anchor, n = slug, 2
        while anchor in self._used:
            anchor, n = f"{slug}-{n}", n + 1
        self._used.add(anchor)
        return anchor
