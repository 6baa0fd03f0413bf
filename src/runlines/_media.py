"""Media for ``run.image()``, ``histogram()``, ``table()``, ``text()`` and ``audio()``.

Knows the run's directory, not sinks: each function checks and encodes its input in the
caller's thread, writes the side file atomically (through `artifacts.write_new`), and returns
the fields of the record that points at it. The record format is in docs/media.md.
"""

from __future__ import annotations

import io
import math
import operator
import os
import struct
import sys
import threading
import wave
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from runlines import _layout
from runlines._encoding import MAX_INLINE_CHARS
from runlines._warnings import warn_user
from runlines.artifacts import check_step, record_path, write_new
from runlines.errors import FieldError, RunlinesWarning

try:  # the door: run.py imports this module in its first media call
    import numpy as np
except ImportError as err:  # pragma: no cover - numpy is in the media extra
    msg = "runlines' media calls (run.image(), ...) need numpy: pip install 'runlines[media]'"
    raise ImportError(msg) from err

__all__ = [
    "IMAGE_FORMATS",
    "MAX_BINS",
    "check_media_name",
    "histogram_record",
    "refusing",
    "save_audio",
    "save_image",
    "save_images",
    "save_table",
    "text_record",
]

IMAGE_FORMATS: Final = ("png", "jpeg")
MAX_BINS: Final = 512  # a histogram's bins are inline in its record: at most this many
_IMAGES: Final = (
    "a numpy array HxW, HxWx1, HxWx3 or HxWx4 (uint8, or float in [0, 1]), a torch tensor "
    "CxHxW or HxW, a PIL image, a matplotlib figure, or the path of a PNG or JPEG file"
)
_PILLOW: Final = "pip install 'runlines[media]'"
_PNG_MAGIC: Final = b"\x89PNG\r\n\x1a\n"
_JPEG_MAGIC: Final = b"\xff\xd8\xff"
_PNG_CHANNELS: Final = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}  # colour type -> channels
_PNG_COLOUR: Final = {1: 0, 3: 2, 4: 6}  # channels -> colour type
_JPEG_QUALITY: Final = 90
_PNG_LEVEL: Final = 1  # zlib level: ~5x faster than 6 on photos, files ~6% larger
_BLOCK: Final = 1 << 16  # values binned at a time (numpy's own block): they stay in the cache
_MAX_CHANNELS: Final = 64  # more audio channels than this is a (channels, frames) mix-up
_PCM: Final = {"uint8": 1, "int16": 2, "int32": 4}  # WAV sample widths, bytes
# what a media call raises for input it refuses: a type, shape, dtype, range, name or step
# (FieldError is a ValueError), or a path with no file; ImportError and a failing disk are not
_REFUSED: Final = (TypeError, ValueError, FileNotFoundError)
_COUNTING: Final = threading.Lock()  # around the refused counts: media calls from threads


_T = TypeVar("_T")


def refusing(
    refused: dict[str, int], name: object, call: Callable[[], _T], strict: bool
) -> _T | None:
    """Return *call*(), or None for input it refused: counted in *refused* by media name, and
    warned of once per name, unless *strict*: then the error is raised.

    Every media call checks and encodes all of its input before its first file is written,
    so a refused call leaves no file and no record.
    """
    try:
        return call()
    except _REFUSED as err:
        if strict:
            raise
        key = name if isinstance(name, str) else repr(name)
        with _COUNTING:
            first = key not in refused
            refused[key] = refused.get(key, 0) + 1
        if first:
            message = (
                f"{err}; nothing was logged for it. Refused media calls are counted by name in "
                "run_end's media_refused (warned once per name); Run(..., strict_fields=True) "
                "raises instead"
            )
            warn_user(message, RunlinesWarning)
        return None


# -- names, steps, files ---------------------------------------------------------------------


def check_media_name(name: object, caller: str) -> str:
    """Return *name*, or raise FieldError: parts split by `/`, each a plain file name."""
    parts = name.split("/") if isinstance(name, str) else []
    plain = bool(parts) and all(
        part and not part.startswith(".") and not any(c in part for c in "\\\0") for part in parts
    )
    if not plain:
        msg = (
            f"{caller} name {name!r} is not a media name: a non-empty str of parts split by "
            "'/' (e.g. 'val/samples'), none empty or starting with '.', without '\\' or NUL"
        )
        raise FieldError(msg)
    return name  # type: ignore[return-value]


def _step(step: object, caller: str) -> int:
    number = check_step(step, caller)
    if number is None:
        msg = f"{caller} needs step=: the training step the media belongs to, e.g. step=1200"
        raise FieldError(msg)
    return number


def _save(
    log_dir: Path, artifacts_dir: Path, name: str, step: int, ext: str, data: Any
) -> tuple[Path, dict[str, object]]:
    """Write *data* (bytes, or a callable given the file) to `media/<name>/<step>-<sha8>.<ext>`."""
    folder = _layout.media_dir(Path(os.path.abspath(artifacts_dir)), name)
    write = data if callable(data) else (lambda out: out.write(data))
    target, size, digest = write_new(folder, ext, write, lambda sha: f"{step}-{sha[:8]}")
    fields: dict[str, object] = {
        "name": name,
        "step": step,
        "path": record_path(target, log_dir),
        "sha256": digest,
        "bytes": size,
    }
    return target, fields


save_side_file = _save  # the public name, for the importers (runlines.importers)


def _type_name(value: object) -> str:
    kind = type(value)
    module = kind.__module__.partition(".")[0]
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


# -- images ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Encoded:
    """An image as a file's bytes, with what its record says of it."""

    data: bytes
    format: str
    width: int
    height: int
    channels: int


def save_image(
    log_dir: Path,
    artifacts_dir: Path,
    name: str,
    image: object,
    *,
    step: object,
    caption: str | None = None,
    format: str | None = None,
    caller: str = "run.image()",
) -> tuple[Path, dict[str, object]]:
    """Encode *image* as PNG (or JPEG) under `media/<name>/`; return its path and record fields.

    Raises:
        FieldError: a bad name, step, caption or format.
        TypeError, ValueError: an image of a type, shape, dtype or range that is not accepted.
        ImportError: JPEG without Pillow.
    """
    check_media_name(name, caller)
    number = _step(step, caller)
    if caption is not None and not isinstance(caption, str):
        msg = f"{caller} caption must be a str or None, got {_type_name(caption)}"
        raise FieldError(msg)
    wanted = _image_format(format, caller)
    encoded = _encode_image(image, wanted, caller)
    ext = "jpg" if encoded.format == "jpeg" else "png"
    target, fields = _save(log_dir, artifacts_dir, name, number, ext, encoded.data)
    fields.update(
        format=encoded.format,
        width=encoded.width,
        height=encoded.height,
        channels=encoded.channels,
    )
    if caption is not None:
        fields["caption"] = caption
    return target, fields


def save_images(
    log_dir: Path,
    artifacts_dir: Path,
    name: str,
    images: Iterable[object],
    *,
    step: object,
    captions: Sequence[str | None] | None = None,
    format: str | None = None,
) -> list[tuple[Path, dict[str, object]]]:
    """Encode each of *images* as save_image does; each record also gets its `index`.

    Every image is checked and encoded before the first file is written: a bad one leaves
    no record of the others either.
    """
    caller = "run.images()"
    check_media_name(name, caller)
    number = _step(step, caller)
    if type(images).__name__ in ("ndarray", "Tensor") and images.ndim == 4:  # type: ignore[attr-defined]
        images = list(images)  # a batch: NxHxWxC (numpy) or NxCxHxW (torch)
    if isinstance(images, (str, bytes)) or not isinstance(images, Sequence) or not images:
        msg = f"{caller} takes a non-empty list of images, got {_type_name(images)}"
        raise TypeError(msg)
    if captions is not None and len(captions) != len(images):
        msg = f"{caller} got {len(images)} images but {len(captions)} captions; give one each"
        raise FieldError(msg)
    wanted = _image_format(format, caller)
    encoded = [_encode_image(one, wanted, f"{caller} image {i}") for i, one in enumerate(images)]
    saved = []
    for index, one in enumerate(encoded):
        ext = "jpg" if one.format == "jpeg" else "png"
        target, fields = _save(log_dir, artifacts_dir, name, number, ext, one.data)
        fields.update(format=one.format, width=one.width, height=one.height, channels=one.channels)
        fields["index"] = index
        caption = None if captions is None else captions[index]
        if caption is not None:
            fields["caption"] = str(caption)
        saved.append((target, fields))
    return saved


def _image_format(format: object, caller: str) -> str | None:
    if format is None:
        return None
    wanted = format.lower() if isinstance(format, str) else format
    wanted = "jpeg" if wanted == "jpg" else wanted
    if wanted not in IMAGE_FORMATS:
        msg = (
            f"{caller} format must be 'png', 'jpeg' or None (PNG, or a file's own), got {format!r}"
        )
        raise FieldError(msg)
    return str(wanted)


def _encode_image(image: object, format: str | None, caller: str) -> _Encoded:
    """Return *image* as PNG (default) or JPEG bytes; a PNG or JPEG file's bytes as they are."""
    if isinstance(image, (str, os.PathLike)):
        return _from_file(image, format, caller)
    figure = _figure_png(image)
    if figure is not None:
        encoded = _parsed(figure, caller)
        return encoded if format in (None, "png") else _reencoded(encoded, format, caller)
    pil = sys.modules.get("PIL.Image")
    if pil is not None and isinstance(image, pil.Image):
        image = _pil_pixels(image, caller)
    pixels = _pixels(image, caller)
    if format == "jpeg":
        return _jpeg(pixels, caller)
    height, width, channels = pixels.shape
    return _Encoded(_png(pixels), "png", width, height, channels)


def _from_file(path: str | os.PathLike[str], format: str | None, caller: str) -> _Encoded:
    try:
        with _layout.open_regular(path) as file:
            data = file.read()
    except OSError as err:
        msg = f"{caller} cannot read the image file {os.fspath(path)!r}: {err}"
        raise FileNotFoundError(msg) from err
    encoded = _parsed(data, f"{caller} file {os.fspath(path)!r}")
    if format is None or format == encoded.format:
        return encoded  # the file's own bytes: no re-encoding, no loss
    return _reencoded(encoded, format, caller)


def _parsed(data: bytes, what: str) -> _Encoded:
    """Return PNG or JPEG *data* with the width, height and channels its header gives."""
    if data.startswith(_PNG_MAGIC) and len(data) >= 33 and data[12:16] == b"IHDR":
        width, height, _depth, colour = struct.unpack(">IIBB", data[16:26])
        return _Encoded(data, "png", width, height, _PNG_CHANNELS.get(colour, 3))
    if data.startswith(_JPEG_MAGIC):
        size = _jpeg_size(data)
        if size is not None:
            return _Encoded(data, "jpeg", *size)
    msg = f"{what} is not a PNG or JPEG image (its first bytes are {data[:8]!r}); pass one"
    raise ValueError(msg)


def _jpeg_size(data: bytes) -> tuple[int, int, int] | None:
    """Return (width, height, channels) from a JPEG's start-of-frame marker, else None."""
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD9)):  # markers without a length
            at += 2
            continue
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if at + 10 > len(data):
                return None
            height, width, channels = struct.unpack(">HHB", data[at + 5 : at + 10])
            return width, height, channels
        at += 2 + length
    return None


def _figure_png(image: object) -> bytes | None:
    """Return a matplotlib figure rendered as PNG (matplotlib's own writer), else None."""
    figure = sys.modules.get("matplotlib.figure")
    if figure is None or not isinstance(image, figure.Figure):
        return None
    buffer = io.BytesIO()
    image.savefig(buffer, format="png")
    return buffer.getvalue()


def _pillow(caller: str, why: str) -> Any:
    try:
        from PIL import Image
    except ImportError as err:
        msg = f"{caller} needs Pillow for {why}: {_PILLOW}"
        raise ImportError(msg) from err
    return Image


def _reencoded(encoded: _Encoded, format: str, caller: str) -> _Encoded:
    image = _pillow(caller, f"{encoded.format} to {format}").open(io.BytesIO(encoded.data))
    return _encode_image(_pil_pixels(image, caller), format, caller)


def _pil_pixels(image: Any, caller: str) -> Any:
    """Return a PIL image as a uint8 numpy array HxW or HxWxC (C: 3 or 4)."""
    mode = image.mode
    if mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        msg = (
            f"{caller} takes 8-bit PIL images, got mode {mode!r}; convert it, e.g. "
            "image.convert('L'), or pass a float array in [0, 1]"
        )
        raise ValueError(msg)
    if mode not in ("L", "RGB", "RGBA"):
        has_alpha = "A" in mode or "transparency" in image.info
        image = image.convert("RGBA" if has_alpha else "RGB")
    return np.asarray(image)


def _pixels(image: object, caller: str) -> Any:
    """Return *image* as a C-contiguous uint8 numpy array HxWxC, C in 1, 3, 4."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(image, torch.Tensor):
        return _from_array(_tensor_hwc(image, caller), caller, "torch tensor")
    if isinstance(image, np.ndarray):
        return _from_array(image, caller, "numpy array")
    msg = f"{caller} cannot take a {_type_name(image)}; it takes {_IMAGES}"
    raise TypeError(msg)


def _tensor_hwc(tensor: Any, caller: str) -> Any:
    shape = tuple(tensor.shape)
    tensor = tensor.detach().cpu()
    if tensor.is_floating_point():
        tensor = tensor.float()  # bfloat16 and float8: numpy lacks them
    if tensor.ndim == 3:
        if shape[0] not in (1, 3, 4):
            msg = (
                f"{caller} takes a torch tensor CxHxW with C 1, 3 or 4, got shape "
                f"{list(shape)}; for HxWxC call .permute(2, 0, 1)"
            )
            raise ValueError(msg)
        tensor = tensor.permute(1, 2, 0)
    return tensor.numpy()


def _from_array(array: Any, caller: str, what: str) -> Any:
    shape = list(array.shape)
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or array.shape[2] not in (1, 3, 4) or 0 in array.shape:
        hint = (
            "; for CxHxW call .transpose(1, 2, 0)"
            if array.ndim == 3 and array.shape[0] in (1, 3, 4)
            else ""
        )
        msg = f"{caller} takes a {what} HxW, HxWx1, HxWx3 or HxWx4, got shape {shape}{hint}"
        raise ValueError(msg)
    if array.dtype == np.uint8:
        return np.ascontiguousarray(array)
    if array.dtype.kind != "f":
        msg = (
            f"{caller} takes a {what} of uint8, or of floats in [0, 1], got dtype "
            f"{array.dtype}; e.g. array.astype(np.uint8) for 0..255 values"
        )
        raise ValueError(msg)
    low, high = float(array.min()), float(array.max())
    if not (low >= 0.0 and high <= 1.0):  # NaN fails both
        msg = (
            f"{caller} takes float pixels in [0, 1], got values from {low} to {high} "
            f"in a {what} of {array.dtype}; scale them (x / 255), or pass uint8"
        )
        raise ValueError(msg)
    return np.rint(array * 255.0).astype(np.uint8)  # round(v * 255): exact for k / 255


def _png(pixels: Any) -> bytes:
    """Return uint8 pixels HxWxC (C: 1, 2, 3 or 4) as PNG bytes, with the standard library.

    Each row is filtered 'Up' (its difference to the row above) and zlib level 1 compresses
    the whole: several times faster than an adaptive filter at level 6, files a little larger.
    """
    height, width, channels = pixels.shape
    rows = pixels.reshape(height, width * channels)
    filtered = np.empty((height, width * channels + 1), dtype=np.uint8)
    filtered[:, 0] = 2  # filter type Up; the first row's "row above" is zeros
    filtered[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])
    header = struct.pack(">IIBBBBB", width, height, 8, _PNG_COLOUR.get(channels, 4), 0, 0, 0)
    if channels == 2:
        header = header[:9] + bytes([4]) + header[10:]
    return b"".join(
        (
            _PNG_MAGIC,
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(filtered.tobytes(), _PNG_LEVEL)),
            _chunk(b"IEND", b""),
        )
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(data, zlib.crc32(kind))
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def _jpeg(pixels: Any, caller: str) -> _Encoded:
    image_module = _pillow(caller, "JPEG")
    height, width, channels = pixels.shape
    if channels == 4:
        msg = (
            f"{caller}: JPEG has no alpha channel, and the image is HxWx4; pass format='png', "
            "or drop the alpha (image[..., :3])"
        )
        raise ValueError(msg)
    image = image_module.fromarray(pixels[:, :, 0] if channels == 1 else pixels)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=_JPEG_QUALITY)
    return _Encoded(buffer.getvalue(), "jpeg", width, height, channels)


# -- histograms ------------------------------------------------------------------------------


def histogram_record(
    name: str, values: object, *, step: object, bins: object = 64
) -> dict[str, Any]:
    """Return the fields of a `histogram` record of *values*, or of precomputed (counts, edges).

    Finite values are binned as `numpy.histogram(values, bins)` bins them; NaN and infinities
    are counted apart (`nan`, `posinf`, `neginf`), never binned.

    Raises:
        FieldError: a bad name, step or bins.
        TypeError, ValueError: values that are not numbers, or a bad (counts, edges) pair.
    """
    caller = "run.histogram()"
    check_media_name(name, caller)
    number = _step(step, caller)
    if isinstance(values, tuple) and _is_pair(values):
        stats = _precomputed(values[0], values[1], caller)
    else:
        stats = _binned(_numbers(values, caller), _bins(bins, caller), caller)
    return {"name": name, "step": number, **stats}


def _is_pair(values: tuple[Any, ...]) -> bool:
    """(counts, edges): a tuple of two sequences, the second one longer by one."""
    if len(values) != 2:
        return False
    counts, edges = values
    try:
        return len(edges) == len(counts) + 1 and len(counts) > 0
    except TypeError:
        return False


def _bins(bins: object, caller: str) -> Any:
    """Return *bins* as a count, or as a numpy array of edges (every rank may share them)."""
    if isinstance(bins, (list, tuple)) or type(bins).__name__ in ("ndarray", "Tensor"):
        edges = np.asarray(bins, dtype=np.float64).reshape(-1)
        if not 2 <= len(edges) <= MAX_BINS + 1:
            msg = f"{caller} bins as edges needs 2 to {MAX_BINS + 1} of them, got {len(edges)}"
            raise FieldError(msg)
        if not np.isfinite(edges).all() or (np.diff(edges) <= 0).any():
            msg = f"{caller} bin edges must be finite and increasing, got {edges.tolist()[:8]}"
            raise FieldError(msg)
        return edges
    count: int | None = None
    if not isinstance(bins, bool):
        try:
            count = operator.index(bins)  # type: ignore[arg-type]
        except TypeError:
            count = None
    if count is None or not 1 <= count <= MAX_BINS:
        msg = (
            f"{caller} bins must be an int from 1 to {MAX_BINS} (inline bins) or a list of "
            f"edges, got {bins!r}"
        )
        raise FieldError(msg)
    return count


def _numbers(values: object, caller: str) -> Any:
    """Return *values* as a flat numpy array of numbers (floats stay in their own dtype)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(values, torch.Tensor):
        tensor = values.detach().cpu()
        if tensor.is_floating_point() and tensor.dtype not in (torch.float32, torch.float64):
            tensor = tensor.float()
        values = tensor.numpy()
    try:
        array = np.asarray(values)
    except (TypeError, ValueError) as err:
        msg = f"{caller} cannot take a {_type_name(values)} as values: {err}"
        raise TypeError(msg) from err
    if array.dtype.kind not in "biuf" or array.dtype == object:
        msg = (
            f"{caller} takes numbers (a numpy array, a torch tensor, a list of numbers) or "
            f"(counts, edges), got a {_type_name(values)} of dtype {array.dtype}"
        )
        raise TypeError(msg)
    if array.dtype.kind == "b":
        array = array.astype(np.int64)
    return array.reshape(-1)


def _binned(array: Any, bins: Any, caller: str) -> dict[str, Any]:
    nan = posinf = neginf = 0
    # min and max carry NaN and infinities: a mask of the finite values only when they do
    if array.dtype.kind == "f" and array.size and not np.isfinite([array.min(), array.max()]).all():
        finite = np.isfinite(array)
        nan = int(np.isnan(array).sum())
        posinf = int(np.isposinf(array).sum())
        neginf = int(array.size - finite.sum() - nan - posinf)
        array = array[finite]
    explicit = not isinstance(bins, int)
    counts: list[Any] = [0] * (len(bins) - 1 if explicit else bins)
    edges: list[float] | None = bins.tolist() if explicit else None
    stats: dict[str, Any]
    if array.size == 0:
        stats = {"count": 0, "min": None, "max": None, "mean": None, "std": None}
    else:
        low, high = array.min(), array.max()
        if not explicit and array.dtype.kind == "f" and low < high:
            found, bin_edges, mean, std = _uniform_bins(array, low, high, bins)
        else:  # values outside explicit edges are not binned, as numpy.histogram does
            found, bin_edges = np.histogram(array, bins, range=(low, high) if low < high else None)
            mean, std = _mean_std(array)
        counts, edges = found.tolist(), bin_edges.tolist()
        stats = {
            "count": int(array.size),
            "min": float(low),
            "max": float(high),
            "mean": mean,
            "std": std,
        }
    return {
        "counts": counts,
        "edges": edges,
        **stats,
        "nan": nan,
        "posinf": posinf,
        "neginf": neginf,
    }


def _mean_std(array: Any) -> tuple[float, float]:
    """Return the mean and (population) std of *array* in float64, in two passes."""
    mean = float(np.add.reduce(array, dtype=np.float64)) / array.size
    centered = np.subtract(array, mean, dtype=np.float64)
    np.multiply(centered, centered, out=centered)
    return mean, math.sqrt(float(np.add.reduce(centered)) / array.size)


def _uniform_bins(array: Any, low: Any, high: Any, bins: int) -> tuple[Any, Any, float, float]:
    """Return numpy.histogram(array, bins)'s counts and edges, and the mean and std, in one
    pass over blocks that stay in the cache.

    numpy estimates each value's bin from `(x - low) / (high - low) * bins`, then moves it down
    one below its bin's lower edge, and up one at or past its upper edge unless in the last
    bin: it ends at the bin whose edges hold the value (the last one closed), from any estimate
    off by at most one. Here the estimate is `(x - low) * scale`, and only a value whose
    estimate lies within `_near_edge` of a whole number (an edge) is checked against the
    edges, numpy's way; every other value is in the bin its estimate's floor names. The mean
    and std combine the blocks' (count, mean, sum of squared deviations) (Chan et al.), each
    block's about a centre near its mean, as exact as two passes, with no BLAS threads.
    """
    dtype = np.result_type(low, high, array)
    edges = np.linspace(low, high, bins + 1, endpoint=True, dtype=dtype)
    scale = np.divide(bins, np.subtract(high, low, dtype=dtype), dtype=dtype)
    near = _near_edge(edges, low, high, bins)
    wide = np.result_type(dtype, np.float32)  # the centres' sums: fast, and no float16
    counts = np.zeros(bins + 1, dtype=np.intp)  # the last: values at `high`, folded in below
    size = min(_BLOCK, array.size)  # each block's arrays are made once, reused in place
    scaled, index = np.empty(size, dtype), np.empty(size, np.intp)
    off, deviation = np.empty(size, dtype), np.empty(size, np.float64)
    seen, mean, squares = 0, 0.0, 0.0
    for start in range(0, array.size, _BLOCK):
        block = array[start : start + _BLOCK]
        size = block.size
        at, out, gap, dev = index[:size], scaled[:size], off[:size], deviation[:size]
        np.subtract(block, low, out=out)
        np.multiply(out, scale, out=out)
        np.copyto(at, out, casting="unsafe")  # toward zero: the floor of a value >= 0
        if near is None:
            _checked(block, at, edges, bins)
        else:
            np.rint(out, out=gap)
            np.subtract(out, gap, out=gap)
            np.abs(gap, out=gap)
            close = np.flatnonzero(gap <= near)
            if close.size:
                at[close] = _checked(block[close], at[close], edges, bins)
        counts += np.bincount(at, minlength=bins + 1)
        centre = float(np.add.reduce(block, dtype=wide)) / size  # near the block's mean
        if not math.isfinite(centre):  # a sum past the float32 range
            centre = float(np.add.reduce(block, dtype=np.float64)) / size
        np.subtract(block, centre, out=dev, dtype=np.float64)
        first = float(np.add.reduce(dev))
        block_squares = float(np.einsum("i,i->", dev, dev)) - first * first / size
        block_mean = centre + first / size
        total = seen + size
        delta = block_mean - mean
        mean += delta * size / total
        squares += block_squares + delta * delta * seen * size / total
        seen = total
    counts[bins - 1] += counts[bins]
    return counts[:bins], edges, mean, math.sqrt(max(squares, 0.0) / seen)


def _near_edge(edges: Any, low: Any, high: Any, bins: int) -> float | None:
    """Return how far from a whole number an estimate may lie and still be on the wrong side
    of an edge; None when that is not well under half a bin (then every value is checked).

    An edge is a few ulps of the larger of |low| and |high| off `low + i * width`, an estimate
    a few ulps of `bins` off `(x - low) / width * bins`: 8 of each, in bins, bounds both.
    """
    eps = float(np.finfo(edges.dtype).eps)
    magnitude = max(abs(float(low)), abs(float(high)))
    width = float(high) - float(low)
    bound = 8.0 * (magnitude * eps * bins / width + bins * eps)
    return bound if bound < 0.25 else None


def _checked(block: Any, at: Any, edges: Any, bins: int) -> Any:
    """Move each estimate in *at* (in place) to the bin whose edges hold its value, numpy's
    way; an estimate of `bins` (the value `high`) stays, for the caller to fold in."""
    np.minimum(at, bins, out=at)
    at -= block < edges[at]
    up = block >= edges[np.minimum(at + 1, bins)]
    up &= at < bins - 1
    at += up
    return at


def _precomputed(counts: Any, edges: Any, caller: str) -> dict[str, Any]:
    try:
        found = np.asarray(counts, dtype=np.float64).reshape(-1)
        bounds = np.asarray(edges, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as err:
        msg = f"{caller} (counts, edges) must both hold numbers: {err}"
        raise TypeError(msg) from err
    if len(found) > MAX_BINS:
        msg = f"{caller} got {len(found)} bins; at most {MAX_BINS} are inline in a record"
        raise FieldError(msg)
    if not np.isfinite(found).all() or (found < 0).any():
        msg = f"{caller} counts must be finite and not negative, got {found.tolist()[:8]}..."
        raise ValueError(msg)
    if not np.isfinite(bounds).all() or (np.diff(bounds) <= 0).any():
        msg = f"{caller} edges must be finite and increasing, got {bounds.tolist()[:8]}..."
        raise ValueError(msg)
    whole = bool((found == np.round(found)).all())
    listed = found.astype(np.int64).tolist() if whole else found.tolist()
    total = int(found.sum()) if whole else float(found.sum())
    return {
        "counts": listed,
        "edges": bounds.tolist(),
        "count": total,
        "min": None,  # not known from bins alone
        "max": None,
        "mean": None,
        "std": None,
        "nan": 0,
        "posinf": 0,
        "neginf": 0,
    }


# -- tables, text, audio ---------------------------------------------------------------------


def save_table(
    log_dir: Path, artifacts_dir: Path, name: str, data: object, *, step: object
) -> tuple[Path, dict[str, object]]:
    """Write *data* (a DataFrame, a list of dicts, a dict of columns) as a Parquet file.

    Raises:
        ImportError: pyarrow is not installed.
        TypeError: data of another type, or values Parquet cannot hold.
    """
    caller = "run.table()"
    check_media_name(name, caller)
    number = _step(step, caller)
    pa = _pyarrow(caller)
    table = _arrow_table(pa, data, caller)
    _, fields = target_fields = _save(
        log_dir,
        artifacts_dir,
        name,
        number,
        "parquet",
        lambda out: pa.parquet.write_table(table, out),
    )
    fields.update(format="parquet", columns=list(table.column_names), rows=table.num_rows)
    return target_fields


def _pyarrow(caller: str) -> Any:
    """Return pyarrow with its Parquet writer: the door to the optional pyarrow."""
    try:
        import pyarrow.parquet
    except ImportError as err:
        msg = f"{caller} needs pyarrow to write Parquet: pip install 'runlines[pandas]'"
        raise ImportError(msg) from err
    return pyarrow


def _arrow_table(pa: Any, data: object, caller: str) -> Any:
    pandas = sys.modules.get("pandas")
    try:
        if pandas is not None and isinstance(data, pandas.DataFrame):
            return pa.Table.from_pandas(data, preserve_index=False)
        if isinstance(data, list) and all(isinstance(row, dict) for row in data):
            return pa.Table.from_pylist(data)
        if isinstance(data, dict):
            return pa.table(data)
    except (pa.ArrowException, TypeError, ValueError) as err:
        msg = f"{caller} cannot write this {_type_name(data)} as Parquet: {err}"
        raise TypeError(msg) from err
    msg = (
        f"{caller} takes a pandas DataFrame, a list of dicts (one per row) or a dict of "
        f"columns, got a {_type_name(data)}"
    )
    raise TypeError(msg)


def text_record(
    log_dir: Path, artifacts_dir: Path, name: str, text: object, *, step: object
) -> tuple[Path | None, dict[str, object]]:
    """Return a `text` record: the text inline up to MAX_INLINE_CHARS, else in a side file."""
    caller = "run.text()"
    check_media_name(name, caller)
    number = _step(step, caller)
    if not isinstance(text, str):
        msg = (
            f"{caller} takes a str, got a {_type_name(text)}; e.g. str(value) or '\\n'.join(lines)"
        )
        raise TypeError(msg)
    if len(text) <= MAX_INLINE_CHARS:  # the long-string rule of log() (docs/format.md)
        return None, {"name": name, "step": number, "text": text, "chars": len(text)}
    data = text.encode("utf-8", "replace")
    target, fields = _save(log_dir, artifacts_dir, name, number, "txt", data)
    fields.update(format="txt", chars=len(text))
    return target, fields


def save_audio(
    log_dir: Path,
    artifacts_dir: Path,
    name: str,
    samples: object,
    sample_rate: object,
    *,
    step: object,
) -> tuple[Path, dict[str, object]]:
    """Write *samples* as a WAV file (the standard library's `wave`).

    Samples: 1-d (mono); numpy 2-d (frames, channels), as soundfile reads them; torch 2-d
    (channels, frames), as torchaudio does. Floats in [-1, 1] (clipped) become 16-bit PCM;
    uint8, int16 and int32 are written as they are.
    """
    caller = "run.audio()"
    check_media_name(name, caller)
    number = _step(step, caller)
    rate = _sample_rate(sample_rate, caller)
    pcm = _pcm(samples, caller)
    frames, channels = pcm.shape

    def write(out: Any) -> None:
        with wave.open(out, "wb") as wav:
            wav.setnchannels(channels)
            wav.setsampwidth(pcm.dtype.itemsize)
            wav.setframerate(rate)
            wav.writeframes(pcm.tobytes())

    target, fields = _save(log_dir, artifacts_dir, name, number, "wav", write)
    fields.update(format="wav", sample_rate=rate, channels=channels, frames=frames)
    return target, fields


def _sample_rate(rate: object, caller: str) -> int:
    number: int | None = None
    if not isinstance(rate, bool):
        try:
            number = operator.index(rate)  # type: ignore[arg-type]
        except TypeError:
            number = None
    if number is None or not 1 <= number <= 2**31 - 1:
        msg = f"{caller} sample_rate must be a positive int (per second, e.g. 16000), got {rate!r}"
        raise FieldError(msg)
    return number


def _pcm(samples: object, caller: str) -> Any:
    """Return *samples* as little-endian PCM, shape (frames, channels)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(samples, torch.Tensor):
        tensor = samples.detach().cpu()
        tensor = tensor.float() if tensor.is_floating_point() else tensor
        array = tensor.numpy()
        array = array.T if array.ndim == 2 else array  # (channels, frames) -> (frames, channels)
    elif isinstance(samples, np.ndarray):
        array = samples
    else:
        msg = f"{caller} takes a numpy array or a torch tensor, got a {_type_name(samples)}"
        raise TypeError(msg)
    shape = list(array.shape)
    array = array[:, None] if array.ndim == 1 else array
    if array.ndim != 2 or array.shape[0] == 0 or not 1 <= array.shape[1] <= _MAX_CHANNELS:
        msg = (
            f"{caller} takes samples 1-d (mono) or 2-d (numpy: frames x channels, torch: "
            f"channels x frames), got shape {shape}; transpose a (channels, frames) numpy array"
        )
        raise ValueError(msg)
    if array.dtype.kind == "f":
        if not np.isfinite(array).all():
            msg = f"{caller} samples hold NaN or infinities; replace them (np.nan_to_num)"
            raise ValueError(msg)
        return (np.clip(array, -1.0, 1.0) * 32767.0).round().astype("<i2")
    if array.dtype.name not in _PCM:
        msg = (
            f"{caller} takes float samples in [-1, 1], or uint8, int16 or int32, got {array.dtype}"
        )
        raise ValueError(msg)
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
