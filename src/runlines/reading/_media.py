"""Media records read back: `media()` (one row per record, the file's absolute path) and
`histograms()` (one row per run, name and step; ranks merged on request). docs/media.md.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from runlines import _layout
from runlines.errors import FieldError
from runlines.reading._files import LogFile, find_logs, run_labels
from runlines.reading._frames import load
from runlines.reading._rules import did_you_mean, import_pandas

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["histograms", "media"]

_FIRST: Final = ("ts", "event", "run", "name", "step", "kind", "path")
_HISTOGRAM_COLUMNS: Final = (
    "run", "name", "step", "counts", "edges", "count", "min", "max", "mean", "std", "nan",
    "posinf", "neginf",
)  # fmt: skip


def media(
    *sources: str | os.PathLike[str],
    kind: str | Iterable[str] | None = None,
    name: str | Iterable[str] | None = None,
) -> pd.DataFrame:
    """Return the media records of *sources* (logs or folders): one row per record.

    Columns: ``ts``, ``event``, ``run``, ``name``, ``step``, ``kind`` (the record's event:
    image, histogram, table, text or audio), ``path`` (the side file's absolute path, None for
    inline records), then the records' own fields (``width``, ``height``, ``caption``,
    ``counts``, ``text``, ...) and ``rank`` and ``attempt``. Records a resumed attempt
    superseded are left out, as `load()` leaves them out.

    Raises:
        FieldError: a *kind* that is no media kind.
        ReadError: a missing source, or a folder without logs.
    """
    kinds = _names_of(kind, "kind", _layout.MEDIA_EVENTS)
    names = _names_of(name, "name", None)
    pd = import_pandas("media()")
    found = find_logs(*sources)
    labels = run_labels(found)
    frames = [f for log in found if (f := _log_media(pd, log, kinds, names, labels)) is not None]
    if not frames:
        return pd.DataFrame({column: pd.Series(dtype=object) for column in _FIRST})
    frame = pd.concat(frames, ignore_index=True, sort=False)
    rest = [c for c in frame.columns if c not in _FIRST]
    return frame[[*_FIRST, *rest]]


def _names_of(
    value: str | Iterable[str] | None, what: str, allowed: tuple[str, ...] | None
) -> list[str] | None:
    if value is None:
        return None
    names = [value] if isinstance(value, str) else list(value)
    if not names or not all(isinstance(n, str) for n in names):
        msg = f"{what} must be a str or a list of str, got {value!r}"
        raise TypeError(msg)
    for one in names:
        if allowed is not None and one not in allowed:
            msg = f"kind {one!r} is no media kind{did_you_mean(one, allowed)}; kinds: " + (
                ", ".join(allowed)
            )
            raise FieldError(msg)
    return names


def _log_media(
    pd: Any,
    log: LogFile,
    kinds: list[str] | None,
    names: list[str] | None,
    labels: dict[Any, str],
) -> pd.DataFrame | None:
    """Return *log*'s media records as load() keeps them, or None when it has none."""
    try:
        frame = load(log.path, event=kinds or list(_layout.MEDIA_EVENTS))
    except FieldError:  # no record of these events: load() says so, media() has no rows
        return None
    if names is not None and "name" in frame.columns:
        frame = frame[frame["name"].isin(names)]
    if frame.empty or "name" not in frame.columns:
        return None
    frame = frame.reset_index(drop=True)
    if log.path in labels:
        frame["run"] = labels[log.path]
    if log.rank is not None and "rank" not in frame.columns:
        frame["rank"] = log.rank
    frame["kind"] = frame["event"]
    folder = os.path.abspath(log.path.parent)
    paths = frame["path"] if "path" in frame.columns else pd.Series([None] * len(frame))
    frame["path"] = [
        os.path.normpath(os.path.join(folder, p)) if isinstance(p, str) else None for p in paths
    ]
    return frame


def histograms(
    *sources: str | os.PathLike[str],
    name: str | Iterable[str] | None = None,
    merge_ranks: bool = False,
) -> pd.DataFrame:
    """Return one row per (run, name, step) of `histogram` records: ``counts``, ``edges``,
    ``count``, ``min``, ``max``, ``mean``, ``std``, ``nan``, ``posinf``, ``neginf``.

    A distributed run has a row per rank (column ``rank``), unless *merge_ranks*: then the
    ranks' histograms of a step are merged into one row (``ranks``: how many). Where the ranks'
    edges are the same, counts are summed, exactly (``exact`` True): log with the same
    explicit ``bins=`` edges on every rank for that. Otherwise each rank's counts are spread
    onto common edges (from the lowest edge to the highest, as many bins as the most any rank
    has), assuming values uniform within a bin (``exact`` False). The count, min, max, nan
    and infinity counts, mean and std (pooled) are exact either way.
    """
    pd = import_pandas("histograms()")
    frame = media(*sources, kind="histogram", name=name)
    if frame.empty:
        return pd.DataFrame({column: pd.Series(dtype=object) for column in _HISTOGRAM_COLUMNS})
    if "rank" not in frame.columns:
        frame["rank"] = None
    ranks = frame["rank"].astype(object).where(frame["rank"].notna(), None)
    frame = frame.assign(rank=ranks)
    # the last record of a (run, rank, name, step) stands: logged twice, the later one counts
    frame = frame.drop_duplicates(["run", "rank", "name", "step"], keep="last")
    if not merge_ranks:
        columns = [*_HISTOGRAM_COLUMNS[:3], "rank", *_HISTOGRAM_COLUMNS[3:]]
        if frame["rank"].isna().all():
            columns.remove("rank")
        rows = frame.sort_values(["run", "name", "step"], kind="stable")
        return rows[columns].reset_index(drop=True)
    merged = [
        _merged(key, group.to_dict("records"))
        for key, group in frame.groupby(["run", "name", "step"], sort=True)
    ]
    return pd.DataFrame(merged)


def _merged(key: Any, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Return one histogram of the ranks' *parts* of one (run, name, step)."""
    run, name, step = key
    binned = [p for p in parts if isinstance(p.get("edges"), list) and p["edges"]]
    exact = all(p["edges"] == binned[0]["edges"] for p in binned)
    if not binned:
        counts, edges = list(parts[0].get("counts") or []), None
    elif exact:
        counts = np.sum([np.asarray(p["counts"]) for p in binned], axis=0).tolist()
        edges = binned[0]["edges"]
    else:
        counts, edges = _rebinned(binned)
    total = sum(int(p.get("count") or 0) for p in parts)
    return {
        "run": run,
        "name": name,
        "step": step,
        "counts": counts,
        "edges": edges,
        "count": total,
        "min": _extreme(min, parts, "min"),
        "max": _extreme(max, parts, "max"),
        **_pooled(parts, total),
        **{k: sum(int(p.get(k) or 0) for p in parts) for k in ("nan", "posinf", "neginf")},
        "ranks": len(parts),
        "exact": exact,
    }


def _rebinned(parts: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Spread each part's counts onto common edges, uniformly within each of its bins."""
    low = min(p["edges"][0] for p in parts)
    high = max(p["edges"][-1] for p in parts)
    bins = max(len(p["counts"]) for p in parts)
    edges = np.linspace(low, high, bins + 1)
    counts = np.zeros(bins)
    for part in parts:
        cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(part["counts"], float))])
        counts += np.diff(np.interp(edges, np.asarray(part["edges"], float), cumulative))
    return counts.tolist(), edges.tolist()


def _extreme(pick: Any, parts: list[dict[str, Any]], field: str) -> float | None:
    values = [p[field] for p in parts if _is_finite(p.get(field))]
    return pick(values) if values else None


def _pooled(parts: list[dict[str, Any]], total: int) -> dict[str, float | None]:
    """Return the mean and std of all the parts' values, from each part's count, mean, std."""
    known = [p for p in parts if p.get("count") and _is_finite(p.get("mean"))]
    if not known or sum(p["count"] for p in known) != total:
        return {"mean": None, "std": None}
    mean = sum(p["count"] * p["mean"] for p in known) / total
    spread = sum(p["count"] * (p["std"] ** 2 + (p["mean"] - mean) ** 2) for p in known)
    return {"mean": mean, "std": math.sqrt(spread / total)}


def _is_finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
