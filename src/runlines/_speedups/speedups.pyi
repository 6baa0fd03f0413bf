"""Types of the C fast paths in speedups.c (see there for what each does)."""

from collections.abc import Callable
from types import TracebackType
from typing import Any

class Writer:
    enabled: bool
    hits: int
    writing: int  # calls inside their writes now (a closing run waits for 0)
    __wrapped__: Callable[..., None]
    def __init__(
        self,
        *,
        slow: Callable[..., None],
        failed: Callable[[int, bytes, int, OSError | None], None],
        span_slow: Callable[..., None],
        span_names: dict[str, str],
        plans: dict[tuple[Any, ...], Any],
        texts: dict[str, str],
        clock: Callable[[], float],
        dumps: Callable[..., bytes],
        default: Callable[[Any], Any],
        option: int,
        name: str,
        rank: int | None,
    ) -> None: ...
    def __call__(self, event: str, /, **fields: Any) -> None: ...
    def configure(
        self,
        *,
        enabled: bool,
        fds: tuple[int, ...] | None,
        flush: Callable[[], object] | None,
        next_check: float,
        samplers: dict[str, Any],
    ) -> None: ...
    def forget(self) -> None: ...
    def write_record(self, record: dict[str, Any], /) -> bool: ...
    def write_span(
        self,
        name: str,
        duration_s: float,
        parent: str | None,
        status: str,
        exc_type: str | None,
        fields: dict[str, object],
        /,
    ) -> None: ...
    def set_spans(
        self, *, span_type: type[SpanBase], core: list[Any], slow: Callable[..., Any]
    ) -> None: ...
    def span(self, name: str, /, **fields: Any) -> Any: ...

class SpanBase:
    _core: list[Any]
    _name: str
    _fields: dict[str, object]
    _parent: str | None
    _start: float | None
    def __init__(self, core: list[Any], name: str, fields: dict[str, object]) -> None: ...
    def __enter__(self) -> Any: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
