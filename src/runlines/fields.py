"""The agreed field names of a run log, their drifting aliases and a project's vocabulary.

docs/fields.md lists them; docs/fields_page.py writes that page from this module.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from runlines.errors import FieldError

__all__ = [
    "CPU_PERCENT",
    "CUDA",
    "CUDNN",
    "FIELD",
    "GIT_COMMIT",
    "GIT_DIFF",
    "GIT_DIFF_SHA256",
    "GIT_DIRTY",
    "GIT_NOTE",
    "GPUS",
    "GPU_DRIVER",
    "GPU_MEM_TOTAL_BYTES",
    "GPU_MEM_USED_BYTES",
    "GPU_POWER_W",
    "GPU_TEMP_C",
    "GPU_TORCH_PEAK_BYTES",
    "GPU_UTIL_PERCENT",
    "HOST_MEM_TOTAL_BYTES",
    "HOST_MEM_USED_BYTES",
    "IDLE_S",
    "KINDS",
    "LAST_FINITE",
    "OF_EVENT",
    "PACKAGES",
    "PROJECT_FILE",
    "RESERVED_FIELDS",
    "RSS_BYTES",
    "STACKS",
    "STALLED_S",
    "STANDARD_ALIASES",
    "STANDARD_FIELDS",
    "THREADS",
    "VALUE",
    "WRITER",
    "Field",
    "Vocabulary",
    "drift_message",
    "json_kind",
    "load_vocabulary",
    "render_markdown",
    "type_drift_message",
]

KINDS: Final = frozenset({"number", "integer", "string", "boolean", "object", "array", "any"})
"""The type words a Field may declare."""

RESERVED_FIELDS: Final = frozenset({"ts", "event", "run", "rank", "_nonfinite"})
"""Keys runlines writes itself: a caller may not log them, and no alias may point to them."""

PROJECT_FILE: Final = "runlines.toml"
"""The vocabulary file load_vocabulary(None) reads from the current working directory."""


@dataclasses.dataclass(frozen=True, slots=True)
class Field:
    """An agreed field name, the kind of value it holds and its one-line meaning."""

    name: str
    type: str
    description: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            msg = f"a field name must be a non-empty string, got {self.name!r}"
            raise FieldError(msg)
        if self.type not in KINDS:
            kinds = ", ".join(sorted(KINDS))
            msg = f"field {self.name!r} has type {self.type!r}; use one of: {kinds}"
            raise FieldError(msg)


def _fields(*rows: tuple[str, str, str]) -> Mapping[str, Field]:
    return MappingProxyType({name: Field(name, kind, meaning) for name, kind, meaning in rows})


# -- Watching a live run (docs/watching.md): the environment on run_start, `system`, `stall`,
# `stall_end` and `nonfinite` records. GPU fields are per GPU the process uses, numbered as
# the process sees them (cuda:0 is `gpu0_*`).
PACKAGES: Final = "packages"
CUDA: Final = "cuda"
CUDNN: Final = "cudnn"
GPUS: Final = "gpus"
GPU_DRIVER: Final = "gpu_driver"
GIT_COMMIT: Final = "git_commit"
WRITER: Final = "writer"  # run_start: "c" or "python", the path that wrote the records
GIT_DIRTY: Final = "git_dirty"
GIT_DIFF: Final = "git_diff"
GIT_DIFF_SHA256: Final = "git_diff_sha256"
GIT_NOTE: Final = "git_note"
CPU_PERCENT: Final = "cpu_percent"
RSS_BYTES: Final = "rss_bytes"
HOST_MEM_USED_BYTES: Final = "host_mem_used_bytes"
HOST_MEM_TOTAL_BYTES: Final = "host_mem_total_bytes"
GPU_UTIL_PERCENT: Final = "gpu{}_util_percent"  # .format(index)
GPU_MEM_USED_BYTES: Final = "gpu{}_mem_used_bytes"
GPU_MEM_TOTAL_BYTES: Final = "gpu{}_mem_total_bytes"
GPU_POWER_W: Final = "gpu{}_power_w"
GPU_TEMP_C: Final = "gpu{}_temp_c"
GPU_TORCH_PEAK_BYTES: Final = "gpu{}_torch_peak_bytes"
IDLE_S: Final = "idle_s"
STACKS: Final = "stacks"
THREADS: Final = "threads"
STALLED_S: Final = "stalled_s"
OF_EVENT: Final = "of_event"
FIELD: Final = "field"
VALUE: Final = "value"
LAST_FINITE: Final = "last_finite"
_WATCHING_ROWS: Final = (
    (PACKAGES, "object", "versions of the imported training packages (`torch`, `numpy`, ...)"),
    (CUDA, "string", "the CUDA version torch was built with"),
    (CUDNN, "integer", "the cuDNN version torch loaded, once CUDA is initialised"),
    (GPUS, "array", "model names of the GPUs the process uses"),
    (GPU_DRIVER, "string", "the NVIDIA driver version"),
    (GIT_DIFF, "string", "side file holding the diff of a dirty tree, relative to the log"),
    (GIT_DIFF_SHA256, "string", "sha256 of that diff"),
    (GIT_NOTE, "string", "what git state was not recorded, and why (a slow git, a large diff)"),
    (CPU_PERCENT, "number", "CPU time of the process since the last sample; 100 is one core"),
    (RSS_BYTES, "integer", "resident memory of the process"),
    (HOST_MEM_USED_BYTES, "integer", "memory in use on the host (total less available)"),
    (HOST_MEM_TOTAL_BYTES, "integer", "memory of the host"),
    (GPU_UTIL_PERCENT.format(0), "number", "utilisation of the process's first GPU, 0 to 100"),
    (GPU_MEM_USED_BYTES.format(0), "integer", "memory used on that GPU, by every process"),
    (GPU_MEM_TOTAL_BYTES.format(0), "integer", "memory of that GPU"),
    (GPU_POWER_W.format(0), "number", "power drawn by that GPU, watts"),
    (GPU_TEMP_C.format(0), "number", "temperature of that GPU, degrees Celsius"),
    (GPU_TORCH_PEAK_BYTES.format(0), "integer", "torch's peak allocated memory on that GPU"),
    (IDLE_S, "number", "seconds since the run last logged, when a stall was seen"),
    (STACKS, "string", "side file holding every thread's Python stack, relative to the log"),
    (THREADS, "integer", "number of Python threads"),
    (STALLED_S, "number", "seconds the run logged nothing, when logging resumed"),
    (OF_EVENT, "string", "the event of the record a `nonfinite` record is about"),
    (FIELD, "string", "the field a record is about (a JSON pointer below the top level)"),
    (VALUE, "string", "the non-finite value: `NaN`, `Infinity` or `-Infinity`"),
    (LAST_FINITE, "number", "the last finite value of that field in the log, or null"),
)

STANDARD_FIELDS: Final[Mapping[str, Field]] = _fields(
    # Written by runlines on every record.
    ("ts", "number", "wall-clock time of the record, Unix seconds; written by runlines"),
    ("event", "string", "what happened (`train_step`, `eval`, `run_start`); written by runlines"),
    ("run", "string", "the run's name; written by runlines"),
    ("rank", "integer", "the process rank, in distributed runs only; written by runlines"),
    ("_nonfinite", "object", "where floats written as null were NaN or infinite"),
    # Lifecycle records (run_start, run_end).
    ("id", "string", "identifier of this process's run, time-sortable"),
    ("attempt", "integer", "1 for a new log, one more for each attempt appended to it"),
    ("resume_step", "integer", "the step an attempt resumed from"),
    ("host", "string", "host name of the machine the process runs on"),
    ("pid", "integer", "operating-system process id"),
    ("python", "string", "Python version"),
    ("runlines", "string", "runlines version"),
    ("writer", "string", "which path wrote the log's records: `c` (the fast path) or `python`"),
    ("argv", "array", "the command line, secrets redacted"),
    ("cwd", "string", "the working directory"),
    ("git_commit", "string", "commit of the working directory's git repository"),
    ("git_dirty", "boolean", "whether that repository had uncommitted changes"),
    ("world_size", "integer", "number of processes in a distributed run"),
    ("config", "object", "the run's configuration, secrets redacted"),
    (
        "status",
        "string",
        "how a run or step ended: `ok`, `failed`, `interrupted`, `terminated`, `pruned`",
    ),
    ("duration_s", "number", "elapsed time in seconds"),
    ("dropped", "integer", "records a failing sink lost"),
    ("exc_type", "string", "type name of the exception that ended the run"),
    ("exc_message", "string", "message of that exception, secrets redacted"),
    ("traceback", "string", "formatted traceback of that exception, secrets redacted"),
    ("exit_code", "integer", "the code passed to `sys.exit()`"),
    ("signal", "string", "name of the signal received (`SIGTERM`, `SIGUSR1`)"),
    ("spans", "object", "per span name: `count`, `total_s`, `mean_s`, `max_s`"),
    # What a record is about.
    ("name", "string", "name of the thing the record is about (a span, an artifact)"),
    ("path", "string", "file path, relative to the run directory when inside it"),
    ("n", "integer", "number of items the record counts or aggregates"),
    ("size_bytes", "integer", "size of a file or value in bytes"),
    ("model", "string", "model name or architecture"),
    ("dataset", "string", "dataset name"),
    ("seed", "integer", "random seed"),
    # Training progress and hyperparameters.
    ("epoch", "integer", "passes over the training data so far"),
    ("step", "integer", "optimizer steps taken since training began (global, not per epoch)"),
    ("split", "string", "data split a value is computed on: `train`, `val`, `test`"),
    ("loss", "number", "value of the training objective; on eval records, on that split"),
    ("lr", "number", "learning rate in effect at this step"),
    ("batch_size", "integer", "samples per optimizer step (global, across processes)"),
    ("weight_decay", "number", "weight-decay coefficient"),
    ("momentum", "number", "optimizer momentum"),
    ("grad_norm", "number", "global L2 norm of the gradients, before clipping"),
    # Metrics.
    ("accuracy", "number", "fraction of correct predictions, 0 to 1"),
    ("precision", "number", "true positives / predicted positives, 0 to 1"),
    ("recall", "number", "true positives / actual positives, 0 to 1"),
    ("f1", "number", "harmonic mean of precision and recall, 0 to 1"),
    ("auc", "number", "area under the ROC curve, 0 to 1"),
    ("perplexity", "number", "exp of the mean per-token cross-entropy loss"),
    ("tokens_per_s", "number", "tokens processed per second"),
    ("samples_per_s", "number", "samples processed per second"),
    ("throughput", "number", "items per second when no more specific `*_per_s` name fits"),
    *_WATCHING_ROWS,
)


def _aliases(table: Mapping[str, tuple[str, ...]]) -> Mapping[str, str]:
    return MappingProxyType({alias: agreed for agreed, names in table.items() for alias in names})


# Only names that mean the agreed field wherever they appear: never an event name (train_step),
# a total (epochs, max_steps, num_tokens) or a split-specific metric (val_loss).
STANDARD_ALIASES: Final[Mapping[str, str]] = _aliases(
    {
        "step": (
            "iteration",
            "iter",
            "it",
            "global_step",
            "batch_idx",
            "step_idx",
            "step_num",
            "current_step",
        ),
        "epoch": ("ep", "epoch_idx", "epoch_num", "current_epoch", "cur_epoch"),
        "lr": ("learning_rate", "lr_rate", "lrate"),
        "accuracy": ("acc",),
        "f1": ("f1_score",),
        "grad_norm": ("grad_l2", "grad_l2_norm", "gradient_norm"),
        "perplexity": ("ppl",),
        "tokens_per_s": ("tokens_per_sec", "tokens_per_second", "tok_per_s", "tok_per_sec"),
        "samples_per_s": (
            "samples_per_sec",
            "samples_per_second",
            "examples_per_s",
            "examples_per_sec",
            "examples_per_second",
        ),
        "duration_s": (
            "duration_sec",
            "duration_secs",
            "duration_seconds",
            "elapsed_s",
            "elapsed_sec",
            "elapsed_seconds",
        ),
        "batch_size": ("bs", "bsz"),
        "weight_decay": ("wd",),
        "seed": ("random_seed", "rng_seed"),
        "git_commit": ("commit", "git_sha", "commit_sha"),
        "host": ("hostname",),
        "pid": ("process_id",),
        "path": ("file_path",),
        "model": ("model_name",),
        "dataset": ("dataset_name",),
        "exc_type": ("exception_type",),
        "exc_message": ("exception_message",),
    }
)


def _variants(name: str) -> set[str]:
    """Return the case and separator spellings of a snake_case *name* (learningRate, LR)."""
    words = name.split("_")
    if name.startswith("_") or not all(words):
        return {name}
    capitalized = [word.capitalize() for word in words]
    spellings = {
        name,
        name.upper(),
        "-".join(words),
        "_".join(capitalized),
        words[0] + "".join(capitalized[1:]),
        "".join(capitalized),
    }
    if len(words[-1]) > 1:  # duration_s -> durations would be a different word
        spellings.add("".join(words))
    return spellings


def _lookup_table(fields: Mapping[str, Field], aliases: Mapping[str, str]) -> dict[str, str]:
    """Map every drifting spelling to its agreed name; declared aliases win, fields never drift."""
    lookup: dict[str, str] = {}
    ambiguous: set[str] = set()
    sources = [(name, name) for name in fields if name not in RESERVED_FIELDS]
    for spelled, agreed in [*sources, *aliases.items()]:
        for variant in _variants(spelled):
            if lookup.setdefault(variant, agreed) != agreed:
                ambiguous.add(variant)
    for variant in ambiguous:
        del lookup[variant]
    lookup.update(aliases)
    for name in fields:
        lookup.pop(name, None)
    return lookup


def _check(fields: Mapping[str, Field], aliases: Mapping[str, str]) -> None:
    """Raise FieldError for a vocabulary whose names or aliases do not fit together."""
    for name, field in fields.items():
        if not isinstance(field, Field) or field.name != name:
            msg = f"field {name!r} must be a Field named {name!r}, got {field!r}"
            raise FieldError(msg)
    for alias, agreed in aliases.items():
        if not isinstance(alias, str) or not isinstance(agreed, str) or not alias:
            msg = f"alias {alias!r} -> {agreed!r}: an alias maps a name to an agreed name, both str"
            raise FieldError(msg)
        if alias in fields:
            msg = (
                f"alias {alias!r} is itself an agreed field name; remove it from the aliases "
                f"(or drop the field {alias!r} from the vocabulary first)"
            )
            raise FieldError(msg)
        if agreed in RESERVED_FIELDS:
            msg = f"alias {alias!r} points to {agreed!r}, which runlines writes itself; remove it"
            raise FieldError(msg)
        if agreed not in fields:
            msg = (
                f"alias {alias!r} points to {agreed!r}, which is not an agreed field; "
                f"add a field {agreed!r} or point the alias at an agreed name"
            )
            raise FieldError(msg)


def _as_field_map(fields: Mapping[str, Field] | Iterable[Field]) -> dict[str, Field]:
    if isinstance(fields, Mapping):
        return dict(fields)
    return {field.name: field for field in fields}


class Vocabulary:
    """The agreed field names and drifting aliases a run checks its fields against; immutable."""

    __slots__ = ("_aliases", "_fields", "_lookup")

    def __init__(
        self,
        fields: Mapping[str, Field] | None = None,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        """Build a vocabulary; None means the standard fields or aliases.

        Raises:
            FieldError: an alias points to a name that is not a field, or is a field name.
        """
        field_map = dict(STANDARD_FIELDS if fields is None else fields)
        alias_map = dict(STANDARD_ALIASES if aliases is None else aliases)
        _check(field_map, alias_map)
        self._fields: Mapping[str, Field] = MappingProxyType(field_map)
        self._aliases: Mapping[str, str] = MappingProxyType(alias_map)
        self._lookup = _lookup_table(field_map, alias_map)

    @property
    def fields(self) -> Mapping[str, Field]:
        """The agreed names and their Field, read-only."""
        return self._fields

    @property
    def aliases(self) -> Mapping[str, str]:
        """The declared aliases (alias -> agreed name), read-only; spellings are derived."""
        return self._aliases

    def __repr__(self) -> str:
        return f"<Vocabulary: {len(self._fields)} fields, {len(self._aliases)} aliases>"

    def agreed_name(self, key: str) -> str | None:
        """Return the agreed name *key* drifts from, or None when *key* is not an alias."""
        return self._lookup.get(key)

    def describe(self, name: str) -> Field | None:
        """Return the Field of the agreed *name*, or None when it is not agreed."""
        return self._fields.get(name)

    def extend(
        self,
        *,
        fields: Mapping[str, Field] | Iterable[Field] = (),
        aliases: Mapping[str, str] | None = None,
        remove_aliases: Iterable[str] = (),
    ) -> Vocabulary:
        """Return a new vocabulary with a project's fields and aliases added or overriding.

        A field named like an existing alias replaces that alias. *remove_aliases* drops
        aliases (before *aliases* are added), e.g. when a project uses ``it`` for something else.

        Raises:
            FieldError: an alias points to an unknown name or is a field name, or a removed
                alias does not exist.
        """
        if isinstance(remove_aliases, str):
            msg = f"remove_aliases takes a list of names: remove_aliases=[{remove_aliases!r}]"
            raise TypeError(msg)
        field_map = {**self._fields, **_as_field_map(fields)}
        alias_map = {
            alias: agreed for alias, agreed in self._aliases.items() if alias not in field_map
        }
        for alias in remove_aliases:
            if alias not in self._aliases:
                msg = f"cannot remove alias {alias!r}: it is not an alias of this vocabulary"
                raise FieldError(msg)
            alias_map.pop(alias, None)
        alias_map.update(aliases or {})
        return Vocabulary(field_map, alias_map)

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Vocabulary:
        """Return the standard vocabulary extended by the TOML file at *path*.

        Raises:
            FieldError: the file is not valid TOML or does not describe a vocabulary; the
                message names the file and the problem.
            OSError: the file cannot be read.
        """
        document = _read_toml(path)
        try:
            fields, aliases, removed = _parse_vocabulary(document)
            return cls().extend(fields=fields, aliases=aliases, remove_aliases=removed)
        except FieldError as err:
            msg = f"{os.fspath(path)}: {err}"
            raise FieldError(msg) from err


def _toml_loads(text: str) -> dict[str, Any]:
    import tomllib  # only when a vocabulary file is read: a run that has none does not pay

    return tomllib.loads(text)


def _read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Return the TOML document at *path*, or raise FieldError naming the file."""
    try:
        return _toml_loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as err:  # TOMLDecodeError is a ValueError
        msg = f"{os.fspath(path)} is not a valid TOML file ({err}); fix it (format: docs/fields.md)"
        raise FieldError(msg) from err


_FILE_KEYS: Final = ("fields", "aliases", "remove_aliases")
_FIELD_KEYS: Final = frozenset({"type", "description"})


_Parts = tuple[list[Field], dict[str, str], list[str]]


def _parse_vocabulary(document: Mapping[str, Any]) -> _Parts:
    """Return the fields, aliases and removed aliases of a parsed vocabulary file."""
    unknown = sorted(set(document) - set(_FILE_KEYS))
    if unknown:
        msg = (
            f"unknown key {unknown[0]!r}; a vocabulary file has [fields], [aliases] and "
            "remove_aliases = [...] (before the first [table])"
        )
        raise FieldError(msg)
    fields = [_parse_field(name, entry) for name, entry in _table(document, "fields").items()]
    aliases = {
        name: _parse_alias(name, agreed) for name, agreed in _table(document, "aliases").items()
    }
    return fields, aliases, _parse_removals(document.get("remove_aliases", []))


def _table(document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    table = document.get(key, {})
    if not isinstance(table, Mapping):
        msg = f"{key!r} must be a table: write [{key}] on its own line, then one entry per line"
        raise FieldError(msg)
    return table


def _parse_field(name: str, entry: object) -> Field:
    example = f'{name} = {{ type = "number", description = "..." }}'
    if not isinstance(entry, Mapping):
        msg = f"field {name!r} must be an inline table like {example}"
        raise FieldError(msg)
    unknown = sorted(set(entry) - _FIELD_KEYS)
    if unknown:
        msg = f"field {name!r} has unknown key {unknown[0]!r}; use only type and description"
        raise FieldError(msg)
    description = entry.get("description")
    if not isinstance(description, str) or not description:
        msg = f"field {name!r} needs a one-line description: {example}"
        raise FieldError(msg)
    return Field(name, entry.get("type", "any"), description)


def _parse_alias(alias: str, agreed: object) -> str:
    if alias == "remove_aliases":
        msg = "remove_aliases is inside [aliases]; move it above the first [table] of the file"
        raise FieldError(msg)
    if not isinstance(agreed, str):
        msg = f'alias {alias!r} must map to an agreed name as a string, e.g. {alias} = "step"'
        raise FieldError(msg)
    return agreed


def _parse_removals(names: object) -> list[str]:
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        msg = 'remove_aliases must be a list of alias names, e.g. remove_aliases = ["it"]'
        raise FieldError(msg)
    return names


def load_vocabulary(source: Vocabulary | str | os.PathLike[str] | None) -> Vocabulary:
    """Return the vocabulary a run checks its fields against.

    A Vocabulary is returned as is, a path is read with Vocabulary.from_toml, and None means
    the standard vocabulary extended by ``runlines.toml`` in the current working directory
    when that file exists.
    """
    if isinstance(source, Vocabulary):
        return source
    if source is None:
        project_file = Path.cwd() / PROJECT_FILE
        return Vocabulary.from_toml(project_file) if project_file.is_file() else Vocabulary()
    if isinstance(source, (str, os.PathLike)):
        return Vocabulary.from_toml(source)
    msg = (
        "vocabulary= takes a Vocabulary, a path to a TOML file or None, "
        f"got {type(source).__name__}"
    )
    raise TypeError(msg)


_KIND_BY_TYPE: dict[type, str] = {
    bool: "boolean",
    int: "number",
    float: "number",
    str: "string",
    type(None): "null",
    list: "array",
    tuple: "array",
    set: "array",
    frozenset: "array",
    dict: "object",
}
_KIND_CACHE_LIMIT: Final = 256


def json_kind(value: object) -> str:
    """Return the JSON kind *value* is written as: number, string, boolean, null, array, object.

    NaN and infinities count as numbers (they are written as null, but they are numbers).
    Values runlines writes as their repr count as strings.
    """
    kind = _KIND_BY_TYPE.get(type(value))
    if kind is not None:
        return kind
    try:
        kind, per_type = _slow_kind(value)
    except Exception:  # a value that breaks on a look (a dead weakref.proxy): its repr
        return "string"
    if per_type and len(_KIND_BY_TYPE) < _KIND_CACHE_LIMIT:
        _KIND_BY_TYPE[type(value)] = kind
    return kind


def _slow_kind(value: object) -> tuple[str, bool]:
    """Return (kind, whether every value of this type has that kind)."""
    if isinstance(value, Enum):
        return json_kind(value.value), False
    for base in (bool, int, float, str, dict, list, tuple, set, frozenset):
        if isinstance(value, base):
            return _KIND_BY_TYPE[base], True
    if type(value).__module__.partition(".")[0] in ("numpy", "torch"):
        if type(value).__name__ in ("device", "dtype") or type(value).__name__.endswith("DType"):
            return "string", True  # written as its str(): cuda:0, torch.float32
        return _array_kind(value)
    if isinstance(value, Mapping) or dataclasses.is_dataclass(value):
        return "object", True
    return "string", True  # date, datetime, Path: strings; anything else: its repr


def _array_kind(value: object) -> tuple[str, bool]:
    """Return the kind of a numpy or torch value, by duck typing (neither is imported)."""
    if getattr(value, "ndim", 0):
        return "array", False
    dtype = str(getattr(value, "dtype", ""))
    kind = "boolean" if "bool" in dtype else "string" if "datetime" in dtype else "number"
    is_scalar_type = type(value).__name__ not in ("ndarray", "Tensor", "Parameter")
    return kind, is_scalar_type


def _with_article(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def drift_message(alias: str, agreed: str) -> str:
    """Return the warning text for a field logged under an alias of an agreed name."""
    return (
        f"field {alias!r} drifts from the agreed name {agreed!r}; log it as {agreed}=... "
        f"(or, if {alias!r} means something else here, add it to your vocabulary's fields)"
    )


def type_drift_message(field: str, was: str, now: str) -> str:
    """Return the warning text for a field whose JSON kind changed between records of a run."""
    return (
        f"field {field!r} changed type between records of this run: it was {_with_article(was)}, "
        f"now it is {_with_article(now)}; log one type per field (convert the value, or log "
        "the new meaning under another name)"
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(vocabulary: Vocabulary | None = None) -> str:
    """Return the agreed names and their aliases as two Markdown tables, a blank line between
    them: the tables of docs/fields.md (docs/fields_page.py writes the page around them)."""
    vocab = Vocabulary() if vocabulary is None else vocabulary
    fields = ["| name | type | meaning |", "|---|---|---|"]
    fields += [f"| `{f.name}` | {f.type} | {_cell(f.description)} |" for f in vocab.fields.values()]
    order = {name: index for index, name in enumerate(vocab.fields)}
    by_field = sorted(vocab.aliases.items(), key=lambda item: (order[item[1]], item[0]))
    aliases = ["| alias | agreed name |", "|---|---|"]
    aliases += [f"| `{alias}` | `{agreed}` |" for alias, agreed in by_field]
    return "\n".join(fields) + "\n\n" + "\n".join(aliases)
