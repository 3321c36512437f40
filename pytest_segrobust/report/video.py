"""R2-Bench's video tables (Tables 13 and 14): clean, static, dynamic and temporal, with the drop from clean.

A clip is perturbed *statically* (one perturbation at one level for the whole clip: any image
corruption), *dynamically* (a perturbation and a level drawn per frame or per clip: the
``dynamic[...]`` cell) or *temporally* (frames repeated, reversed or shuffled: the temporal
family, ours). Per model the summary holds the clean row and, per way and level, the mean of
its perturbations' rows; the detail table holds one row per perturbation and level. The columns
are the headline metric (J&F for VOS) and its details (J and F Mean, Recall and Decay;
YouTube-VOS's seen and unseen scores where the metric keeps them).

The drop is recomputed here from the clean and perturbed headline of each row, never copied:
R2-Bench's printed drops contain arithmetic slips. :func:`video_entry` is the value the report
keeps (:class:`~pytest_segrobust.report.model.VideoTables`); :func:`video_tables` draws it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_segrobust.core.modality import Modality, cell_modality
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.report.model import VideoModel, VideoModeRow, VideoRow, VideoTables
from pytest_segrobust.report.r2bench import level_name, numbers
from pytest_segrobust.report.tables import Table, fmt, signed
from pytest_segrobust.store.records import CellRecord

# R2-Bench's way of perturbing a clip, per modality: a perturbation of every frame alike, or a
# chain of them, is static.
WAYS: dict[Modality, str] = {
    Modality.VISUAL: "static",
    Modality.COMPOSITION: "static",
    Modality.DYNAMIC: "dynamic",
    Modality.TEMPORAL: "temporal",
    Modality.AUDIO: "audio",
    Modality.TEXT: "text",
    Modality.BOTH: "both",
    Modality.MIXTURE: "mixture",
}
MODES = tuple(dict.fromkeys(WAYS.values()))
DRAWN = "drawn"  # the level column of a dynamic cell, which draws a level per frame (or clip)


def mode_of(record: CellRecord) -> str:
    """How a cell perturbs its clips: ``dynamic``, ``temporal``, ``static``, ``audio``, or for referring
    video the expression's ``text``, ``both`` (one visual and one text perturbation) or the ``mixture``."""
    return WAYS[cell_modality(record.category, record.corruption)]


def _numbers(
    record: CellRecord, metric: str, further: Sequence[str], corrupted: bool = True
) -> dict[str, float | None]:
    """The headline's numbers of a record (:func:`~pytest_segrobust.report.r2bench.numbers`) and each further metric's score."""
    out: dict[str, float | None] = dict(numbers(record, metric, corrupted))
    for name in further:
        entry = record.metrics.get(name, {})
        value = entry.get("score" if corrupted else "clean_score")
        out[name] = None if value is None else float(value)
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _drop(clean: float | None, value: float | None) -> float | None:
    return None if clean is None or value is None else clean - value


def video_entry(models: Mapping[str, Sequence[CellRecord]], metric: str, further: Sequence[str] = ()) -> VideoTables:
    """Per model: the clean row, one row per perturbation and level, and per way (static, dynamic,
    temporal, audio, ...) and level the mean over its perturbations, each with its drop from clean.
    The columns are the headline metric, its details, then each ``further`` metric's score
    (AVSBench's F beside its mIoU).

    ``headline`` names the column the drops are taken on.
    """
    headline, labels = columns(metric)
    labels |= {name: METRICS.get(name).label for name in further if name not in labels}
    keys = list(labels)
    entries: dict[str, VideoModel] = {}
    for model, records in models.items():
        cells = [r for r in records if r.severity > 0]
        reference = next((r for r in records if r.severity == 0), cells[0] if cells else None)
        clean = None if reference is None else _numbers(reference, metric, further, corrupted=reference.severity == 0)
        clean_headline = None if clean is None else clean.get(headline)
        rows = []
        for record in cells:
            values = _numbers(record, metric, further)
            mode = mode_of(record)
            rows.append(
                VideoRow(
                    perturbation=record.corruption,
                    mode=mode,
                    severity=record.severity,
                    level=DRAWN if mode == "dynamic" else level_name(record.severity),
                    numbers={key: values.get(key) for key in keys},
                    drop=_drop(clean_headline, values.get(headline)),
                )
            )
        by_mode = []
        for mode in MODES:
            for severity in sorted({row.severity for row in rows if row.mode == mode}):
                chosen = [row for row in rows if row.mode == mode and row.severity == severity]
                mean_row = {key: _mean([row.numbers[key] for row in chosen]) for key in keys}
                by_mode.append(
                    VideoModeRow(
                        mode=mode,
                        severity=severity,
                        level=DRAWN if mode == "dynamic" else level_name(severity),
                        perturbations=len(chosen),
                        numbers=mean_row,
                        drop=_drop(clean_headline, mean_row[headline]),
                    )
                )
        entries[model] = VideoModel(
            clean=None if clean is None else {key: clean.get(key) for key in keys},
            perturbations=tuple(rows),
            modes=tuple(by_mode),
        )
    return VideoTables(columns=labels, headline=headline, models=entries)


def columns(metric: str) -> tuple[str, dict[str, str]]:
    """The headline's key and every column (key -> label): the headline first, then the metric's
    details in its own order (J-Mean, J-Recall, J-Decay, F-Mean, ... for J&F).

    The headline's key is the one :func:`~pytest_segrobust.report.r2bench.numbers` files it
    under: the detail labelled as the metric itself, else the metric's name.
    """
    kind = METRICS.get(metric)
    details = dict(kind.detail_labels)
    headline = next((key for key, label in details.items() if label == kind.label), metric)
    return headline, {headline: details.pop(headline, kind.label), **details}


def video_tables(entry: VideoTables) -> list[Table]:
    """Two tables: per way and level (R2-Bench's Tables 13-14), then per perturbation and level."""
    labels = entry.columns
    keys = list(labels)
    headline_label = labels[entry.headline]
    summary, detail = [], []
    for model, data in entry.models.items():
        if data.clean is not None:
            summary.append((model, "clean", "–", *(fmt(data.clean.get(k)) for k in keys), "–"))
        for mean_row in data.modes:
            summary.append(
                (
                    model,
                    mean_row.mode,
                    mean_row.level,
                    *(fmt(mean_row.numbers.get(k)) for k in keys),
                    signed(mean_row.drop),
                )
            )
        for row in data.perturbations:
            detail.append(
                (
                    model,
                    row.mode,
                    row.perturbation,
                    row.level,
                    *(fmt(row.numbers.get(k)) for k in keys),
                    signed(row.drop),
                )
            )
    header = (*(labels[k] for k in keys), f"drop ({headline_label})")
    note = (
        "Static: one perturbation at one level for the whole clip; dynamic: a perturbation and a level drawn "
        "per frame (or per clip, as the cell's options say) from the listed ones (one cell; its level is drawn); "
        "temporal: frames repeated, reversed or shuffled (ours; a frame is scored "
        "against the ground truth of the frame shown); audio: an acoustic perturbation of the clip's sound (audio-visual segmentation); text, both and mixture (referring video): the expression "
        "perturbed, a visual and a text perturbation, R2-Bench's 40/40/20 draw. Levels low, medium, high are severities 1, 3, 5. A way's "
        f"row is the mean of its perturbations' rows; the drop is clean {headline_label} minus the row's, "
        "recomputed here."
    )
    return [
        Table(
            "R2-Bench: video segmentation per way and level", ("model", "way", "level", *header), tuple(summary), note
        ),
        Table(
            "R2-Bench: video segmentation per perturbation and level",
            ("model", "way", "perturbation", "level", *header),
            tuple(detail),
        ),
    ]
