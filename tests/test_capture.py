"""Capture of warnings and logging records through an emit callback, and their exact restore."""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import TextIO

import pytest

from runlines import RunlinesWarning
from runlines._capture import Capture, CaptureSettings, parse_capture

Records = list[tuple[str, dict[str, object]]]


def _line() -> int:
    """Return the line number of the caller's next line."""
    import inspect

    frame = inspect.currentframe()
    assert frame is not None
    assert frame.f_back is not None
    return frame.f_back.f_lineno + 1


@pytest.fixture(name="records")
def _records() -> Records:
    return []


@pytest.fixture(name="shown")
def _shown() -> Iterator[list[str]]:
    """Warnings under the "default" filter, shown by a recording showwarning."""
    shown: list[str] = []

    def showwarning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        shown.append(f"{category.__name__}: {message}")

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = showwarning
        yield shown


def _capture(records: Records, settings: CaptureSettings | None = None) -> Capture:
    def emit(event: str, fields: dict[str, object]) -> None:
        records.append((event, fields))

    return Capture(settings or CaptureSettings(), emit)


class TestParseCapture:
    def test_true_captures_warnings_and_log_records_at_warning(self) -> None:
        expected = CaptureSettings(warnings=True, logging_level=logging.WARNING)
        assert parse_capture(True) == expected

    @pytest.mark.parametrize("value", [False, None, []])
    def test_false_none_and_empty_capture_nothing(self, value: object) -> None:
        assert parse_capture(value) == CaptureSettings(warnings=False, logging_level=None)

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("warnings", CaptureSettings(warnings=True)),
            ("logging", CaptureSettings(warnings=False, logging_level=logging.WARNING)),
            ("all", CaptureSettings(warnings=True, logging_level=logging.WARNING)),
            (["warnings", "logging"], CaptureSettings(logging_level=logging.WARNING)),
            (("logging",), CaptureSettings(warnings=False, logging_level=logging.WARNING)),
        ],
    )
    def test_names_choose_what_is_captured(self, value: object, expected: object) -> None:
        assert parse_capture(value) == expected

    @pytest.mark.parametrize("level", [logging.INFO, "INFO", "info"])
    def test_level_sets_the_lowest_captured_level(self, level: int | str) -> None:
        assert parse_capture("all", level=level).logging_level == logging.INFO

    def test_settings_pass_through_unchanged(self) -> None:
        settings = CaptureSettings(warnings=False, logging_level=logging.ERROR)

        assert parse_capture(settings) is settings

    def test_settings_take_a_level_name(self) -> None:
        assert CaptureSettings(logging_level="DEBUG").logging_level == logging.DEBUG  # type: ignore[arg-type]

    @pytest.mark.parametrize("value", ["warning", "everything", 1, ["warnings", "log"], b"all"])
    def test_unknown_value_raises_listing_the_choices(self, value: object) -> None:
        with pytest.raises(ValueError, match="'warnings', 'logging', 'all'") as info:
            parse_capture(value)

        assert repr(value) in str(info.value)

    @pytest.mark.parametrize("level", ["LOUD", -1, True, 2.5])
    def test_unknown_level_raises(self, level: object) -> None:
        with pytest.raises(ValueError, match="logging level number or name"):
            parse_capture("logging", level=level)  # type: ignore[arg-type]


class TestWarnings:
    def test_shown_warning_becomes_a_record(self, records: Records, shown: list[str]) -> None:
        capture = _capture(records)
        capture.install()

        line = _line()
        warnings.warn("old api", DeprecationWarning, stacklevel=1)
        capture.restore()

        assert records == [
            (
                "warning",
                {
                    "category": "DeprecationWarning",
                    "message": "old api",
                    "filename": __file__,
                    "lineno": line,
                },
            )
        ]

    def test_warning_still_reaches_the_previous_showwarning(
        self, records: Records, shown: list[str]
    ) -> None:
        capture = _capture(records)
        capture.install()

        warnings.warn("seen", UserWarning, stacklevel=1)
        capture.restore()

        assert shown == ["UserWarning: seen"]

    def test_same_location_is_recorded_once_under_the_default_filter(
        self, records: Records, shown: list[str]
    ) -> None:
        capture = _capture(records)
        capture.install()

        for _ in range(3):
            warnings.warn("again", UserWarning, stacklevel=1)
        capture.restore()

        assert len(records) == 1
        assert shown == ["UserWarning: again"]

    def test_ignored_warning_is_not_recorded(self, records: Records, shown: list[str]) -> None:
        warnings.simplefilter("ignore")
        capture = _capture(records)
        capture.install()

        warnings.warn("hidden", UserWarning, stacklevel=1)
        capture.restore()

        assert records == []

    def test_runlines_warning_is_recorded(self, records: Records, shown: list[str]) -> None:
        capture = _capture(records)
        capture.install()

        warnings.warn("sink failed", RunlinesWarning, stacklevel=1)
        capture.restore()

        assert [fields["category"] for _, fields in records] == ["RunlinesWarning"]

    def test_restore_puts_back_the_exact_previous_function(
        self, records: Records, shown: list[str]
    ) -> None:
        before = warnings.showwarning
        capture = _capture(records)

        capture.install()
        assert warnings.showwarning is not before
        capture.restore()

        assert warnings.showwarning is before

    def test_install_and_restore_twice_change_nothing_more(
        self, records: Records, shown: list[str]
    ) -> None:
        before = warnings.showwarning
        capture = _capture(records)

        capture.install()
        capture.install()
        warnings.warn("once", UserWarning, stacklevel=1)
        capture.restore()
        capture.restore()

        assert warnings.showwarning is before
        assert len(records) == 1

    def test_nested_captures_both_record_and_restore_in_lifo_order(self, shown: list[str]) -> None:
        before = warnings.showwarning
        outer_records: Records = []
        inner_records: Records = []
        outer, inner = _capture(outer_records), _capture(inner_records)

        outer.install()
        inner.install()
        warnings.warn("both", UserWarning, stacklevel=1)
        inner.restore()
        after_inner = warnings.showwarning
        outer.restore()

        assert len(outer_records) == len(inner_records) == 1
        assert shown == ["UserWarning: both"]
        assert after_inner is not before
        assert warnings.showwarning is before

    def test_capture_restored_out_of_order_keeps_the_later_one_working(
        self, shown: list[str]
    ) -> None:
        before = warnings.showwarning
        first_records: Records = []
        second_records: Records = []
        first, second = _capture(first_records), _capture(second_records)
        first.install()
        second.install()
        second_hook = warnings.showwarning

        first.restore()
        warnings.warn("after first closed", UserWarning, stacklevel=1)
        kept = warnings.showwarning
        second.restore()

        assert kept is second_hook
        assert first_records == []
        assert len(second_records) == 1
        assert shown == ["UserWarning: after first closed"]
        assert warnings.showwarning is before

    def test_restore_keeps_a_showwarning_installed_after_it(
        self, records: Records, shown: list[str]
    ) -> None:
        capture = _capture(records)
        capture.install()
        hooked = warnings.showwarning
        seen_by_later: list[str] = []

        def later(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            seen_by_later.append(str(message))
            hooked(message, category, filename, lineno, file, line)

        warnings.showwarning = later
        capture.restore()
        warnings.warn("through the chain", UserWarning, stacklevel=1)

        assert warnings.showwarning is later
        assert records == []
        assert seen_by_later == ["through the chain"]
        assert shown == ["UserWarning: through the chain"]

    def test_warning_raised_while_emitting_is_not_captured_again(self, shown: list[str]) -> None:
        records: Records = []

        def emit(event: str, fields: dict[str, object]) -> None:
            records.append((event, fields))
            warnings.warn("from inside emit", RunlinesWarning, stacklevel=1)

        capture = Capture(CaptureSettings(), emit)
        capture.install()

        warnings.warn("outer", UserWarning, stacklevel=1)
        capture.restore()

        assert [fields["message"] for _, fields in records] == ["outer"]
        assert shown == ["RunlinesWarning: from inside emit", "UserWarning: outer"]

    def test_failing_emit_is_reported_and_the_warning_goes_on(
        self, shown: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        def emit(event: str, fields: dict[str, object]) -> None:
            raise OSError("disk full")

        capture = Capture(CaptureSettings(), emit)
        capture.install()

        warnings.warn("still shown", UserWarning, stacklevel=1)
        capture.restore()

        assert shown == ["UserWarning: still shown"]
        assert "could not record a warning record" in capsys.readouterr().err

    def test_warnings_from_other_threads_are_recorded(
        self, records: Records, shown: list[str]
    ) -> None:
        capture = _capture(records)
        capture.install()

        threads = [
            threading.Thread(target=warnings.warn, args=(f"thread {i}", UserWarning))
            for i in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        capture.restore()

        assert sorted(fields["message"] for _, fields in records) == [  # type: ignore[type-var]
            f"thread {i}" for i in range(4)
        ]

    def test_nothing_is_replaced_when_warnings_are_off(
        self, records: Records, shown: list[str]
    ) -> None:
        before = warnings.showwarning
        capture = _capture(records, CaptureSettings(warnings=False))

        capture.install()

        assert warnings.showwarning is before
        capture.restore()


@pytest.fixture(name="logger")
def _logger() -> Iterator[logging.Logger]:
    """A logger of this test's own that lets every level through."""
    logger = logging.getLogger("tests.capture")
    logger.setLevel(logging.DEBUG)
    yield logger
    logger.setLevel(logging.NOTSET)
    logger.handlers.clear()


def _installed(records: Records, level: int = logging.WARNING) -> Capture:
    capture = _capture(records, CaptureSettings(warnings=False, logging_level=level))
    capture.install()
    return capture


class _ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class TestLogging:
    def test_record_at_the_level_becomes_a_log_record(
        self, records: Records, logger: logging.Logger
    ) -> None:
        capture = _installed(records)

        logger.warning("disk %s", "low")
        capture.restore()

        assert records == [
            ("log", {"logger": "tests.capture", "level": "WARNING", "message": "disk low"})
        ]

    def test_record_below_the_level_is_not_captured(
        self, records: Records, logger: logging.Logger
    ) -> None:
        capture = _installed(records)

        logger.info("chatty")
        logger.debug("chattier")
        capture.restore()

        assert records == []

    def test_lower_level_is_captured_when_asked(
        self, records: Records, logger: logging.Logger
    ) -> None:
        capture = _installed(records, logging.INFO)

        logger.info("epoch done")
        logger.debug("detail")
        capture.restore()

        assert [fields["message"] for _, fields in records] == ["epoch done"]

    def test_exception_text_is_recorded(self, records: Records, logger: logging.Logger) -> None:
        capture = _installed(records)

        try:
            1 / 0  # noqa: B018
        except ZeroDivisionError:
            logger.exception("step failed")
        capture.restore()

        fields = records[0][1]
        assert fields["level"] == "ERROR"
        assert fields["message"] == "step failed"
        assert "ZeroDivisionError: division by zero" in str(fields["exc_text"])

    def test_root_level_and_handlers_are_unchanged_after_restore(
        self, records: Records, logger: logging.Logger
    ) -> None:
        root = logging.getLogger()
        level, handlers = root.level, list(root.handlers)

        capture = _installed(records, logging.DEBUG)
        assert root.level == level
        capture.restore()

        assert root.level == level
        assert root.handlers == handlers

    def test_other_handlers_still_get_every_record(
        self, records: Records, logger: logging.Logger
    ) -> None:
        handler = _ListHandler()
        logger.addHandler(handler)
        capture = _installed(records)

        logger.warning("for both")
        logger.info("for the other only")
        capture.restore()

        assert handler.messages == ["for both", "for the other only"]
        assert len(records) == 1

    def test_runlines_own_records_are_skipped(self, records: Records) -> None:
        capture = _installed(records)

        logging.getLogger("runlines.sinks").warning("internal")
        capture.restore()

        assert records == []

    def test_log_call_while_emitting_is_not_captured_again(self, logger: logging.Logger) -> None:
        handler = _ListHandler()
        logger.addHandler(handler)
        records: Records = []

        def emit(event: str, fields: dict[str, object]) -> None:
            records.append((event, fields))
            logger.warning("from inside emit")

        capture = Capture(CaptureSettings(warnings=False, logging_level=logging.WARNING), emit)
        capture.install()

        logger.warning("outer")
        capture.restore()

        assert [fields["message"] for _, fields in records] == ["outer"]
        assert handler.messages == ["outer", "from inside emit"]

    def test_warning_while_emitting_a_log_record_is_not_captured(
        self, shown: list[str], logger: logging.Logger
    ) -> None:
        records: Records = []

        def emit(event: str, fields: dict[str, object]) -> None:
            records.append((event, fields))
            warnings.warn("from inside emit", RunlinesWarning, stacklevel=1)

        capture = Capture(CaptureSettings(logging_level=logging.WARNING), emit)
        capture.install()

        logger.warning("outer")
        capture.restore()

        assert [event for event, _ in records] == ["log"]
        assert shown == ["RunlinesWarning: from inside emit"]

    def test_last_resort_still_prints_when_no_other_handler_is_there(
        self,
        records: Records,
        logger: logging.Logger,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        monkeypatch.setattr(logging.getLogger(), "handlers", [])
        capture = _installed(records, logging.ERROR)

        logger.warning("below the capture level")
        logger.error("captured and printed")
        capture.restore()

        assert capsys.readouterr().err.splitlines() == [
            "below the capture level",
            "captured and printed",
        ]
        assert [fields["message"] for _, fields in records] == ["captured and printed"]

    def test_two_captures_print_a_last_resort_record_once(
        self,
        logger: logging.Logger,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        monkeypatch.setattr(logging.getLogger(), "handlers", [])
        first_records: Records = []
        second_records: Records = []
        first, second = _installed(first_records), _installed(second_records)

        logger.warning("once on stderr")
        second.restore()
        first.restore()

        assert capsys.readouterr().err == "once on stderr\n"
        assert len(first_records) == len(second_records) == 1

    @pytest.mark.parametrize(("capture_warnings", "expected"), [(True, 0), (False, 1)])
    def test_py_warnings_records_are_skipped_when_warnings_are_captured(
        self, records: Records, capture_warnings: bool, expected: int
    ) -> None:
        settings = CaptureSettings(warnings=capture_warnings, logging_level=logging.WARNING)
        capture = _capture(records, settings)
        capture.install()

        logging.getLogger("py.warnings").warning("a warning, through logging")
        capture.restore()

        assert len([event for event, _ in records if event == "log"]) == expected

    def test_records_from_other_threads_are_captured(
        self, records: Records, logger: logging.Logger
    ) -> None:
        capture = _installed(records)
        log: Callable[..., None] = logger.warning

        threads = [threading.Thread(target=log, args=(f"thread {i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        capture.restore()

        assert len(records) == 4
