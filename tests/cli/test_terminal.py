"""What the commands print of a log is safe for a terminal: control characters escaped."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from _logs import line, write
from runlines import Run
from runlines.cli import main
from runlines.cli._terminal import printable, printable_lines


class TestControlCharacters:
    """What a log holds is printed with its control characters escaped, never obeyed."""

    # OSC 52 (sets the clipboard), the window title, clear screen, a C1 CSI, a bidi override
    CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
    TITLE = "\x1b]0;pwned\x07"
    CLEAR = "\x1b[2J"

    def hostile_log(self, run_dir: Path) -> Path:
        note = f"{self.TITLE}\x9b2J\u202eevil\r\n"
        config = {f"lr{self.CLEAR}": 1, "note": note}
        return write(
            run_dir / "h.jsonl",
            line("run_start", run=f"h{self.TITLE}", attempt=1, config=config),
            line(f"train{self.CLIPBOARD}", run="h", note=note, **{f"loss{self.CLEAR}": 0.5}),
        )

    @staticmethod
    def assert_escaped(text: str) -> None:
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", text), repr(text)
        assert "\\x1b]52;c;" in text

    def test_each_kind_of_control_character_is_written_as_its_escape(self) -> None:
        text = "a\x00\t\n\r\x1b\x7f\x85\x9b\u061c\u200f\u2028\u202e\u2066\u2069é€"

        assert printable(text) == (
            "a\\x00\\t\\n\\r\\x1b\\x7f\\x85\\x9b\\u061c\\u200f\\u2028\\u202e\\u2066\\u2069é€"
        )
        assert printable_lines("a\x1b\nb\r") == "a\\x1b\nb\\r"

    @pytest.mark.parametrize("command", [["show"], ["tail"], ["ls"]])
    def test_show_tail_and_ls_escape_names_and_values(
        self, command: list[str], run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = self.hostile_log(run_dir)
        target = run_dir if command == ["ls"] else log
        if command == ["ls"]:
            write(run_dir / f"x{self.CLIPBOARD}.jsonl", line("run_start", run="x"))

        assert main([*command, str(target)]) == 0

        out = capsys.readouterr().out
        self.assert_escaped(out)
        if command != ["ls"]:
            assert "\\x1b]0;pwned\\x07\\x9b2J\\u202eevil\\r\\n" in out

    def test_tail_follow_escapes_appended_records(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], sleep_appends: Callable[..., None]
    ) -> None:
        log = write(run_dir / "f.jsonl", line("run_start", run="f"))
        appended = line(f"eval{self.CLIPBOARD}", run="f", split=self.TITLE)
        sleep_appends(log, [appended])

        assert main(["tail", "-f", "-n", "0", str(log)]) == 0

        self.assert_escaped(capsys.readouterr().out)

    def test_an_error_naming_events_escapes_them(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = self.hostile_log(run_dir)

        assert main(["tail", "--event", "nope", str(log)]) == 1

        self.assert_escaped(capsys.readouterr().err)

    def test_diff_escapes_config_keys(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        a = write(run_dir / "a.jsonl", line("run_start", run="a", config={self.CLIPBOARD: 1}))
        b = write(run_dir / "b.jsonl", line("run_start", run="b", config={self.CLIPBOARD: 2}))

        assert main(["diff", str(a), str(b)]) == 0

        self.assert_escaped(capsys.readouterr().out)

    def test_which_escapes_the_artifact_path(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        weights = run_dir / f"model{self.CLIPBOARD}.bin"
        with Run("w", run_dir, stdout=False) as run:
            weights.write_bytes(b"weights")
            run.artifact("model", path=weights)

        assert main(["which", str(weights)]) == 0

        self.assert_escaped(capsys.readouterr().out)
