"""Side files for ``run.artifact()``: save objects atomically, or register existing files.

Knows the run's directory, not sinks: returns the fields of the record that points at the file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import operator
import os
import secrets
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, SupportsIndex

import orjson

from runlines import _layout
from runlines.errors import FieldError, RunlinesWarning

__all__ = ["check_step", "hash_path", "record_path", "save_artifact", "write_new"]

_JSON_OPTIONS: Final = (
    orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
)
_SAVES: Final = (
    "numpy arrays, torch tensors, pandas DataFrames, dict, list, bytes and str, "
    "or registers an existing file or folder with path=..."
)


def save_artifact(
    log_dir: Path,
    artifacts_dir: Path,
    name: str,
    obj: object = None,
    *,
    path: str | os.PathLike[str] | None = None,
    step: SupportsIndex | None = None,
) -> tuple[Path, dict[str, object]]:
    """Save *obj* under *artifacts_dir*, or register the file or folder at *path*.

    Returns:
        The artifact's absolute path, and the ``artifact`` record's fields: ``name``,
        ``path`` (relative to *log_dir*, POSIX), ``bytes``, ``sha256``, ``format``, then
        ``shape`` and ``dtype`` for arrays, and ``step`` when given.

    Raises:
        FieldError: a name that is not a plain file name, a bad step (an int, or a 0-d
            integer numpy or torch value, that is not negative), not exactly one of *obj*
            and *path*.
        FileNotFoundError: *path* does not exist.
        TypeError: *obj* is of a type this cannot save.
    """
    _check_name(name)
    step = check_step(step, "artifact")
    if (obj is None) == (path is None):
        got = "neither" if obj is None else "both"
        msg = (
            f"run.artifact({name!r}) needs exactly one of an object to save or path= to "
            f"an existing file or folder; got {got}"
        )
        raise FieldError(msg)
    if path is not None:
        target, size, digest, fmt = _register(name, path)
        meta: dict[str, object] = {}
    else:
        plan = _plan(name, obj)
        stem = name if step is None else f"{name}-step{step}"
        target, size, digest = _write_new(Path(os.path.abspath(artifacts_dir)), stem, plan)
        fmt, meta = plan.format, plan.meta
    record: dict[str, object] = {
        "name": name,
        "path": record_path(target, log_dir),
        "bytes": size,
        "sha256": digest,
        "format": fmt,
        **meta,
    }
    if step is not None:
        record["step"] = step
    return target, record


def hash_path(path: str | os.PathLike[str]) -> str:
    """Return the sha256 (hex) of a file, or of a folder as artifact records compute it."""
    return _layout.hash_path(Path(path))[1]


# -- checks --------------------------------------------------------------------------------


def _check_name(name: object) -> None:
    plain = (
        isinstance(name, str)
        and name != ""
        and not name.startswith(".")
        and not any(c in name for c in "/\\\0")
    )
    if not plain:
        msg = (
            f"artifact name {name!r} is not a plain file name: it must be a non-empty str "
            "without '/', '\\' or NUL, not starting with '.'; e.g. 'predictions'"
        )
        raise FieldError(msg)


def check_step(step: object, what: str) -> int | None:
    """Return *step* as an int: an int, np.int64(5) and torch.tensor(5) are steps, as in log().

    Raises:
        FieldError: a bool, a negative number, or no integer; *what* names the caller.
    """
    if step is None:
        return None
    number: int | None = None
    if not isinstance(step, bool) and type(step).__name__ not in ("bool_", "bool"):
        try:
            number = operator.index(step)  # type: ignore[arg-type]
        except Exception:  # a float, a str, a tensor of floats or of several items
            number = None
    if number is None or number < 0:
        msg = (
            f"{what} step must be a non-negative int (or a 0-d integer numpy or torch value) "
            f"or None, got {step!r}"
        )
        raise FieldError(msg)
    return number


# -- registering an existing file ----------------------------------------------------------


def _register(name: str, path: str | os.PathLike[str]) -> tuple[Path, int, str, str]:
    target = Path(os.path.abspath(path))
    if not target.exists():
        msg = (
            f"run.artifact({name!r}, path={os.fspath(path)!r}): no such file or folder "
            f"{str(target)!r}; save it first, or fix the path"
        )
        raise FileNotFoundError(msg)
    size, digest, left_out = _layout.hash_path(target)
    if left_out:
        msg = (
            f"run.artifact({name!r}, path=...): left {', '.join(left_out)} out of the sha256 of "
            f"{str(target)!r}: not regular files (FIFOs, sockets or devices)"
        )
        warnings.warn(msg, RunlinesWarning, stacklevel=4)
    fmt = "dir" if target.is_dir() else (target.suffix[1:].lower() or "file")
    return target, size, digest, fmt


def record_path(target: Path, log_dir: Path) -> str:
    """Return *target* as a record holds it: relative to *log_dir*, POSIX (absolute when the
    two share nothing but the filesystem root)."""
    # Relative to the log's folder, so moving the folder (or a tree that holds both) keeps
    # the record valid; absolute when the two share nothing but the filesystem root.
    base = os.path.abspath(log_dir)
    target = Path(os.path.abspath(target))
    try:
        common = os.path.commonpath([base, target])
    except ValueError:  # different Windows drives
        return target.as_posix()
    if os.path.dirname(common) == common:
        return target.as_posix()
    return Path(os.path.relpath(target, base)).as_posix()


# -- saving an object ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """How to write one object: file extension, format name, record extras, writer."""

    ext: str
    format: str
    write: Callable[[_HashingWriter], object]  # its return value is ignored
    meta: dict[str, object] = field(default_factory=dict)


def _plan(name: str, obj: object) -> _Plan:
    # Look types up in sys.modules: an object can only be a numpy array if numpy is
    # already imported, so this never imports numpy, torch or pandas itself.
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, (numpy.ndarray, numpy.generic)):
        return _array_plan(name, numpy.asarray(obj), {})
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _tensor_plan(name, obj)
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(obj, pandas.DataFrame):
        return _frame_plan(obj)
    if isinstance(obj, (dict, list)):
        data = _to_json(name, obj)
        return _Plan("json", "json", lambda out: out.write(data))
    if isinstance(obj, (bytes, bytearray, memoryview)):
        raw = obj  # written as is: no copy
        return _Plan("bin", "bin", lambda out: out.write(raw))
    if isinstance(obj, str):
        text = obj.encode("utf-8", "replace")  # a lone surrogate becomes '?'
        return _Plan("txt", "txt", lambda out: out.write(text))
    msg = f"run.artifact() cannot save a {type(obj).__qualname__!r}; it saves {_SAVES}"
    raise TypeError(msg)


def _array_plan(name: str, array: Any, meta: dict[str, object]) -> _Plan:
    if array.dtype.hasobject:
        msg = (
            f"run.artifact({name!r}) cannot save an array of Python objects as .npy; "
            "convert it to a numeric dtype, or save array.tolist() as JSON"
        )
        raise TypeError(msg)
    meta = {"shape": list(array.shape), "dtype": str(array.dtype), **meta}
    numpy = sys.modules["numpy"]
    return _Plan("npy", "npy", lambda out: numpy.save(out, array, allow_pickle=False), meta)


def _tensor_plan(name: str, tensor: Any) -> _Plan:
    tensor = tensor.detach().cpu()
    dtype = str(tensor.dtype).removeprefix("torch.")
    try:
        array = tensor.numpy()
    except TypeError:  # bfloat16, float8 and other dtypes numpy lacks
        return _array_plan(
            name, tensor.float().numpy(), {"dtype": dtype, "stored_dtype": "float32"}
        )
    return _array_plan(name, array, {})


def _frame_plan(frame: Any) -> _Plan:
    meta: dict[str, object] = {"shape": list(frame.shape)}
    try:  # is pyarrow there to write Parquet? Asked without importing it
        parquet = importlib.util.find_spec("pyarrow") is not None
    except (ImportError, ValueError):  # a module in sys.modules without a spec
        parquet = False
    if not parquet:
        return _Plan("csv", "csv", lambda out: frame.to_csv(out, mode="wb"), meta)
    return _Plan("parquet", "parquet", lambda out: frame.to_parquet(out), meta)


def _to_json(name: str, obj: object) -> bytes:
    try:
        return orjson.dumps(obj, default=_json_default, option=_JSON_OPTIONS)
    except orjson.JSONEncodeError as err:
        msg = f"run.artifact({name!r}) cannot write this {type(obj).__name__} as JSON: {err}"
        raise TypeError(msg) from err


def _json_default(value: Any) -> object:
    module = type(value).__module__.partition(".")[0]
    if module == "numpy":  # arrays orjson does not take natively (strided, float16...)
        return value.tolist()
    if module == "torch":
        return value.detach().cpu().tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, frozenset)):
        try:
            return sorted(value)
        except TypeError:
            return list(value)
    msg = f"{type(value).__qualname__} is not JSON serializable"
    raise TypeError(msg)


# -- atomic, never-overwriting write -------------------------------------------------------


class _HashingWriter:
    """A binary file that hashes and counts what goes through it."""

    __slots__ = ("_file", "bytes", "sha256")

    def __init__(self, file: Any) -> None:
        self._file = file
        self.bytes = 0
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self.sha256.update(data)
        self.bytes += memoryview(data).nbytes
        written: int = self._file.write(data)
        return written

    def flush(self) -> None:
        self._file.flush()

    def tell(self) -> int:
        return self.bytes

    @property
    def closed(self) -> bool:
        closed: bool = self._file.closed
        return closed

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False


def _write_new(folder: Path, stem: str, plan: _Plan) -> tuple[Path, int, str]:
    """Write *plan* to a new file in *folder*; return (path, bytes, sha256)."""
    _check_inside(folder, f"{stem}.{plan.ext}")
    return write_new(folder, plan.ext, plan.write, lambda _sha256: stem)


def write_new(
    folder: Path,
    ext: str,
    write: Callable[[_HashingWriter], object],
    stem_of: Callable[[str], str],
) -> tuple[Path, int, str]:
    """Write a new file `<stem>.<ext>` in *folder* atomically; return (path, bytes, sha256).

    *write* gets a binary file that hashes what goes through it; *stem_of* gets the file's
    sha256 once it is written. The file gets its name only once complete (and fsynced); a
    taken name gets `-2`, `-3`, ... A crash leaves at most a hidden `.<...>.tmp` file.
    """
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder / f".{secrets.token_hex(6)}.tmp"  # hidden: names never start with '.'
    try:
        with temp.open("xb") as file:  # mode 0o666 less the umask, as any new file
            out = _HashingWriter(file)
            write(out)
            file.flush()
            # fsync before the file gets its name: after a power loss the name points at
            # complete data or does not exist.
            os.fsync(file.fileno())
        final = _link_new_name(temp, folder, stem_of(out.sha256.hexdigest()), ext)
    finally:
        temp.unlink(missing_ok=True)
    return final, out.bytes, out.sha256.hexdigest()


def _link_new_name(temp: Path, folder: Path, stem: str, ext: str) -> Path:
    # os.link fails if the name exists, so two writers can never take the same name.
    use_link = True
    counter = 1
    while True:
        final = folder / (f"{stem}.{ext}" if counter == 1 else f"{stem}-{counter}.{ext}")
        counter += 1
        if use_link:
            try:
                os.link(temp, final)
                return final
            except FileExistsError:
                continue
            except OSError:  # no hard links here (FAT, some FUSE mounts)
                use_link = False
        # Without hard links: check, then rename; a writer racing in between can lose.
        if not final.exists():
            os.replace(temp, final)
            return final


def _check_inside(folder: Path, file_name: str) -> None:
    joined = os.path.abspath(folder / file_name)
    if os.path.dirname(joined) != os.path.abspath(folder):
        msg = f"artifact file {file_name!r} would land outside {str(folder)!r}; use a plain name"
        raise FieldError(msg)
