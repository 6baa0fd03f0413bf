"""The vocabulary: agreed names, drifting aliases, project extensions and the generated docs."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runlines.errors import FieldError
from runlines.fields import (
    KINDS,
    RESERVED_FIELDS,
    STANDARD_ALIASES,
    STANDARD_FIELDS,
    Field,
    Vocabulary,
    drift_message,
    json_kind,
    load_vocabulary,
    type_drift_message,
)

DOCS = Path(__file__).resolve().parent.parent / "docs"
DOCS_FIELDS = DOCS / "fields.md"


def _page_script() -> Any:
    """docs/fields_page.py, the script that writes docs/fields.md, as a module."""
    spec = importlib.util.spec_from_file_location("fields_page", DOCS / "fields_page.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fields_page = _page_script()

REQUIRED_FIELDS = [
    *("ts", "event", "run", "rank", "epoch", "step", "loss", "lr", "split", "duration_s", "n"),
    *("name", "path", "status", "id", "attempt", "accuracy", "precision", "recall", "f1"),
    *("grad_norm", "tokens_per_s", "samples_per_s", "perplexity", "batch_size", "weight_decay"),
    *("momentum", "throughput"),
]

LEGIT_NAMES = [
    *("train_step", "eval", "run_start", "run_end", "val_loss", "train_loss", "epochs"),
    *("max_steps", "num_steps", "total_steps", "steps", "num_tokens", "max_tokens", "tokens"),
    *("batch", "session", "local_rank", "duration", "time", "elapsed", "durations", "iters"),
    *("item", "items", "items_per_s", "learning", "rate", "lr_scheduler", "accuracy_top5"),
]

TOML_EXAMPLE = """\
remove_aliases = ["it"]

[fields]
tokens_seen = { type = "integer", description = "tokens consumed so far" }

[aliases]
tok = "tokens_seen"
"""


def _write(tmp_path: Path, text: str, name: str = "vocab.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


class TestStandardVocabulary:
    @pytest.mark.parametrize("name", REQUIRED_FIELDS)
    def test_required_name_is_agreed_with_a_type_and_a_meaning(self, name: str) -> None:
        field = STANDARD_FIELDS[name]

        assert field.name == name
        assert field.type in KINDS
        assert field.description

    @pytest.mark.parametrize(("alias", "agreed"), STANDARD_ALIASES.items())
    def test_every_standard_alias_maps_to_an_agreed_field(self, alias: str, agreed: str) -> None:
        assert agreed in STANDARD_FIELDS
        assert agreed not in RESERVED_FIELDS
        assert Vocabulary().agreed_name(alias) == agreed

    @pytest.mark.parametrize("name", STANDARD_FIELDS)
    def test_agreed_name_is_not_an_alias(self, name: str) -> None:
        assert Vocabulary().agreed_name(name) is None

    @pytest.mark.parametrize(
        ("alias", "agreed"),
        [
            *(("iteration", "step"), ("iter", "step"), ("it", "step"), ("global_step", "step")),
            *(("batch_idx", "step"), ("learning_rate", "lr"), ("lr_rate", "lr"), ("ep", "epoch")),
            *(("acc", "accuracy"), ("gradnorm", "grad_norm"), ("grad_l2", "grad_norm")),
        ],
    )
    def test_issue_aliases_map_to_their_agreed_name(self, alias: str, agreed: str) -> None:
        assert Vocabulary().agreed_name(alias) == agreed

    @pytest.mark.parametrize(
        ("spelling", "agreed"),
        [
            *(("learningRate", "lr"), ("LearningRate", "lr"), ("LEARNING_RATE", "lr")),
            *(("learning-rate", "lr"), ("globalStep", "step"), ("Loss", "loss"), ("LR", "lr")),
            *(("batchSize", "batch_size"), ("gradNorm", "grad_norm"), ("Iteration", "step")),
        ],
    )
    def test_case_and_separator_variants_drift_to_the_agreed_name(
        self, spelling: str, agreed: str
    ) -> None:
        assert Vocabulary().agreed_name(spelling) == agreed

    @pytest.mark.parametrize("name", LEGIT_NAMES)
    def test_legit_name_that_only_looks_close_is_not_an_alias(self, name: str) -> None:
        assert Vocabulary().agreed_name(name) is None

    def test_reserved_names_have_no_variants(self) -> None:
        vocab = Vocabulary()

        assert [vocab.agreed_name(n) for n in ("TS", "Event", "RUN", "Rank")] == [None] * 4

    def test_describe_returns_the_field_of_an_agreed_name(self) -> None:
        assert Vocabulary().describe("step") == STANDARD_FIELDS["step"]

    def test_describe_returns_none_for_an_unknown_name(self) -> None:
        assert Vocabulary().describe("iteration") is None

    def test_vocabulary_cannot_be_changed_in_place(self) -> None:
        vocab = Vocabulary()

        with pytest.raises(TypeError):
            vocab.fields["x"] = Field("x", "any", "x")  # type: ignore[index]
        with pytest.raises(AttributeError):
            vocab.aliases = {}  # type: ignore[misc]

    def test_field_is_frozen(self) -> None:
        field = Field("x", "any", "x")

        with pytest.raises(dataclasses.FrozenInstanceError):
            field.type = "number"  # type: ignore[misc]

    def test_field_with_an_unknown_type_is_refused_with_the_allowed_types(self) -> None:
        with pytest.raises(FieldError, match=r"field 'x' has type 'int'; use one of: any, array"):
            Field("x", "int", "x")

    def test_empty_vocabulary_has_no_names(self) -> None:
        vocab = Vocabulary(fields={}, aliases={})

        assert (dict(vocab.fields), dict(vocab.aliases), vocab.agreed_name("iteration")) == (
            {},
            {},
            None,
        )

    def test_own_fields_with_standard_aliases_must_contain_their_targets(self) -> None:
        with pytest.raises(FieldError, match=r"alias '.+' points to '.+', which is not an agreed"):
            Vocabulary(fields={"loss": STANDARD_FIELDS["loss"]})

    def test_field_registered_under_another_name_is_refused(self) -> None:
        with pytest.raises(FieldError, match=r"field 'a' must be a Field named 'a'"):
            Vocabulary(fields={"a": Field("b", "any", "b")}, aliases={})


class TestExtend:
    def test_adds_a_project_field_and_alias(self) -> None:
        vocab = Vocabulary().extend(
            fields={"tokens_seen": Field("tokens_seen", "integer", "tokens consumed so far")},
            aliases={"tok": "tokens_seen"},
        )

        assert vocab.describe("tokens_seen") == Field(
            "tokens_seen", "integer", "tokens consumed so far"
        )
        assert vocab.agreed_name("tok") == "tokens_seen"
        assert vocab.agreed_name("iteration") == "step"

    def test_accepts_a_list_of_fields(self) -> None:
        vocab = Vocabulary().extend(fields=[Field("tokens_seen", "integer", "tokens")])

        assert "tokens_seen" in vocab.fields

    def test_project_field_gets_case_variants(self) -> None:
        vocab = Vocabulary().extend(fields=[Field("tokens_seen", "integer", "tokens")])

        assert vocab.agreed_name("tokensSeen") == "tokens_seen"

    def test_overrides_the_meaning_of_an_agreed_field(self) -> None:
        vocab = Vocabulary().extend(fields=[Field("step", "integer", "micro-batches seen")])

        assert vocab.describe("step") == Field("step", "integer", "micro-batches seen")
        assert vocab.agreed_name("iteration") == "step"

    def test_project_field_named_like_an_alias_replaces_the_alias(self) -> None:
        vocab = Vocabulary().extend(fields=[Field("iteration", "integer", "outer loop count")])

        assert vocab.agreed_name("iteration") is None
        assert "iteration" not in vocab.aliases

    def test_remove_aliases_drops_an_alias_and_its_variants(self) -> None:
        vocab = Vocabulary().extend(remove_aliases=["it"])

        assert (vocab.agreed_name("it"), vocab.agreed_name("IT")) == (None, None)
        assert vocab.agreed_name("iter") == "step"

    def test_alias_can_be_pointed_at_another_field(self) -> None:
        vocab = Vocabulary().extend(aliases={"it": "epoch"})

        assert vocab.agreed_name("it") == "epoch"

    def test_leaves_the_original_unchanged(self) -> None:
        base = Vocabulary()

        base.extend(aliases={"tok": "step"}, remove_aliases=["it"])

        assert base.agreed_name("tok") is None
        assert base.agreed_name("it") == "step"

    def test_alias_to_an_unknown_name_is_refused_with_the_fix(self) -> None:
        with pytest.raises(
            FieldError,
            match=r"alias 'tok' points to 'tokens_seen', which is not an agreed field; "
            r"add a field 'tokens_seen'",
        ):
            Vocabulary().extend(aliases={"tok": "tokens_seen"})

    def test_alias_that_is_an_agreed_name_is_refused(self) -> None:
        with pytest.raises(FieldError, match=r"alias 'loss' is itself an agreed field name"):
            Vocabulary().extend(aliases={"loss": "lr"})

    def test_alias_to_a_reserved_name_is_refused(self) -> None:
        with pytest.raises(FieldError, match=r"points to 'ts', which runlines writes itself"):
            Vocabulary().extend(aliases={"timestamp": "ts"})

    def test_removing_an_unknown_alias_is_refused(self) -> None:
        with pytest.raises(FieldError, match=r"cannot remove alias 'nope': it is not an alias"):
            Vocabulary().extend(remove_aliases=["nope"])

    def test_remove_aliases_as_a_single_string_is_refused(self) -> None:
        with pytest.raises(TypeError, match=r"remove_aliases=\['it'\]"):
            Vocabulary().extend(remove_aliases="it")


class TestFromToml:
    def test_reads_fields_aliases_and_removals_on_top_of_the_standard(self, tmp_path: Path) -> None:
        path = _write(tmp_path, TOML_EXAMPLE)

        vocab = Vocabulary.from_toml(path)

        assert vocab.describe("tokens_seen") == Field(
            "tokens_seen", "integer", "tokens consumed so far"
        )
        assert vocab.agreed_name("tok") == "tokens_seen"
        assert vocab.agreed_name("it") is None
        assert vocab.agreed_name("iteration") == "step"

    def test_type_defaults_to_any(self, tmp_path: Path) -> None:
        path = _write(tmp_path, '[fields]\nnote = { description = "free text" }\n')

        assert Vocabulary.from_toml(str(path)).describe("note") == Field("note", "any", "free text")

    def test_empty_file_is_the_standard_vocabulary(self, tmp_path: Path) -> None:
        path = _write(tmp_path, "")

        vocab = Vocabulary.from_toml(path)

        assert (dict(vocab.fields), dict(vocab.aliases)) == (
            dict(STANDARD_FIELDS),
            dict(STANDARD_ALIASES),
        )

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ("[fields\n", r"is not a valid TOML file \(.+\); fix it"),
            ("colour = 1\n", r"unknown key 'colour'; a vocabulary file has \[fields\]"),
            ("fields = 3\n", r"'fields' must be a table: write \[fields\]"),
            ('[fields]\nx = "meaning"\n', r"field 'x' must be an inline table like x = \{ type"),
            ("[fields]\nx = { type = 'number' }\n", r"field 'x' needs a one-line description"),
            (
                "[fields]\nx = { description = 'd', unit = 's' }\n",
                r"field 'x' has unknown key 'unit'; use only type and description",
            ),
            ("[fields]\nx = { type = 'float', description = 'd' }\n", r"use one of: any, array"),
            ("[aliases]\ntok = 3\n", r"alias 'tok' must map to an agreed name as a string"),
            (
                '[aliases]\ntok = "tokens_seen"\n',
                r"alias 'tok' points to 'tokens_seen', which is not an agreed field",
            ),
            ('[aliases]\nloss = "lr"\n', r"alias 'loss' is itself an agreed field name"),
            (
                '[aliases]\nremove_aliases = ["it"]\n',
                r"remove_aliases is inside \[aliases\]; move it above the first \[table\]",
            ),
            ('remove_aliases = "it"\n', r"remove_aliases must be a list of alias names"),
            ('remove_aliases = ["nope"]\n', r"cannot remove alias 'nope'"),
        ],
    )
    def test_bad_file_is_refused_naming_the_file_and_the_problem(
        self, tmp_path: Path, text: str, problem: str
    ) -> None:
        path = _write(tmp_path, text)

        with pytest.raises(FieldError, match=problem) as caught:
            Vocabulary.from_toml(path)

        assert str(caught.value).startswith(str(path))

    def test_file_that_is_not_utf8_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "vocab.toml"
        path.write_bytes(b"\xff\xfe[fields]")

        with pytest.raises(FieldError, match=r"vocab\.toml is not a valid TOML file"):
            Vocabulary.from_toml(path)

    def test_missing_file_raises_file_not_found(self, tmp_path: Path) -> None:
        with pytest.raises(FileNotFoundError):
            Vocabulary.from_toml(tmp_path / "missing.toml")


class TestLoadVocabulary:
    def test_returns_a_vocabulary_as_is(self) -> None:
        vocab = Vocabulary()

        assert load_vocabulary(vocab) is vocab

    def test_reads_a_path_given_as_str_or_pathlike(self, tmp_path: Path) -> None:
        path = _write(tmp_path, TOML_EXAMPLE)

        assert load_vocabulary(str(path)).agreed_name("tok") == "tokens_seen"
        assert load_vocabulary(path).agreed_name("tok") == "tokens_seen"

    def test_none_without_a_project_file_is_the_standard_vocabulary(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)

        vocab = load_vocabulary(None)

        assert dict(vocab.fields) == dict(STANDARD_FIELDS)
        assert dict(vocab.aliases) == dict(STANDARD_ALIASES)

    def test_none_reads_runlines_toml_in_the_working_directory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _write(tmp_path, TOML_EXAMPLE, name="runlines.toml")
        monkeypatch.chdir(tmp_path)

        vocab = load_vocabulary(None)

        assert vocab.agreed_name("tok") == "tokens_seen"

    def test_other_types_are_refused(self) -> None:
        with pytest.raises(TypeError, match=r"vocabulary= takes a Vocabulary, a path .* got dict"):
            load_vocabulary({"step": "int"})  # type: ignore[arg-type]


class _Colour(enum.Enum):
    RED = "red"
    ONE = 1


@dataclasses.dataclass
class _Point:
    x: int


class TestJsonKind:
    @pytest.mark.parametrize(
        ("value", "kind"),
        [
            *((1, "number"), (1.5, "number"), (float("nan"), "number"), (True, "boolean")),
            *((False, "boolean"), (None, "null"), ("x", "string"), ([1], "array")),
            *(((1, 2), "array"), ({1, 2}, "array"), (frozenset(), "array"), ({}, "object")),
            *((np.float32(1.5), "number"), (np.int64(3), "number"), (np.bool_(True), "boolean")),
            *((np.str_("a"), "string"), (np.array([1, 2]), "array"), (np.array(3.0), "number")),
            *((np.array(True), "boolean"), (np.float64(2.0), "number")),
            *((datetime.datetime(2026, 5, 1), "string"), (datetime.date(2026, 5, 1), "string")),
            *((Path("a/b"), "string"), (_Colour.RED, "string"), (_Colour.ONE, "number")),
            *((_Point(1), "object"), (object(), "string"), (b"raw", "string")),
        ],
    )
    def test_kind_of_a_value_is_the_json_kind_it_is_written_as(
        self, value: object, kind: str
    ) -> None:
        assert json_kind(value) == kind

    def test_kind_of_a_numpy_scalar_type_is_remembered(self) -> None:
        first = json_kind(np.uint8(1))

        assert (first, json_kind(np.uint8(2))) == ("number", "number")

    def test_importing_fields_loads_no_heavy_module(self) -> None:
        code = (
            "import sys, runlines.fields; "
            "print(sorted({'numpy', 'pandas', 'torch'} & set(sys.modules)))"
        )

        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout

        assert out.strip() == "[]"


class TestMessages:
    def test_drift_message_names_alias_and_agreed_name_and_the_fix(self) -> None:
        message = drift_message("iteration", "step")

        assert message.startswith("field 'iteration' drifts from the agreed name 'step'")
        assert "log it as step=..." in message
        assert "vocabulary" in message

    def test_type_drift_message_names_the_field_and_both_kinds(self) -> None:
        message = type_drift_message("step", "number", "string")

        assert message.startswith(
            "field 'step' changed type between records of this run: "
            "it was a number, now it is a string"
        )
        assert "log one type per field" in message

    def test_type_drift_message_uses_an_before_vowels(self) -> None:
        assert "it was an array, now it is an object" in type_drift_message("x", "array", "object")


class TestFieldsPage:
    def test_docs_fields_md_is_what_the_script_writes(self) -> None:
        written = DOCS_FIELDS.read_text(encoding="utf-8")

        assert written == fields_page.render(), (
            "docs/fields.md is out of date; regenerate it with `python docs/fields_page.py`"
        )

    def test_lists_every_field_and_alias(self) -> None:
        text = fields_page.render()

        assert all(f"| `{name}` | {f.type} |" in text for name, f in STANDARD_FIELDS.items())
        assert all(f"| `{a}` | `{g}` |" in text for a, g in STANDARD_ALIASES.items())

    def test_renders_a_project_vocabulary(self) -> None:
        vocab = Vocabulary().extend(
            fields=[Field("tokens_seen", "integer", "tokens | consumed")],
            aliases={"tok": "tokens_seen"},
        )

        text = fields_page.render(vocab)

        assert "| `tokens_seen` | integer | tokens \\| consumed |" in text
        assert "| `tok` | `tokens_seen` |" in text

    def test_the_script_writes_the_page_next_to_itself(self, tmp_path: Path) -> None:
        script = shutil.copy(DOCS / "fields_page.py", tmp_path / "fields_page.py")

        subprocess.run([sys.executable, script], check=True)

        assert (tmp_path / "fields.md").read_text(encoding="utf-8") == fields_page.render()


@given(st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,20}", fullmatch=True))
def test_agreed_name_is_none_or_an_agreed_field(key: str) -> None:
    agreed = Vocabulary().agreed_name(key)

    assert agreed is None or (agreed in STANDARD_FIELDS and agreed != key)
