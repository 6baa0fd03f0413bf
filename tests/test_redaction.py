"""Redaction: secrets never reach the output, ordinary training fields are left alone."""

from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
import json
import random
import re
import string
import subprocess
import sys
import uuid
from types import MappingProxyType

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runlines.errors import FieldError
from runlines.redaction import (
    DEFAULT_REDACTOR,
    REDACTED,
    Redactor,
    is_secret_key,
    redact,
    redact_argv,
    redact_fields,
    redact_text,
)

# Secrets are assembled at run time from a seeded generator, so that the source holds no
# string a secret scanner would flag, and every run tests the same values.
_rng = random.Random(20260501)
_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits


def _random(n: int, alphabet: str = _ALNUM) -> str:
    """*n* random characters; from the default alphabet, with both cases and a digit."""
    chars = [_rng.choice(alphabet) for _ in range(n)]
    if alphabet == _ALNUM:
        chars[:3] = ["a", "Z", "7"]
    return "".join(chars)


def _b64url(document: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


def _pem(label: str) -> tuple[str, tuple[str, ...]]:
    lines = tuple(_random(64) for _ in range(4))
    begin, end = "-----BEGIN " + label + "-----", "-----END " + label + "-----"
    return "\n".join([begin, *lines, end]), lines


def _shape(text: str, *secrets: str) -> tuple[str, tuple[str, ...]]:
    return text, secrets or (text,)


def _token(prefix: str, n: int, alphabet: str = _ALNUM) -> tuple[str, tuple[str, ...]]:
    return _shape(prefix + _random(n, alphabet))


_JWT = (
    _b64url({"alg": "HS256", "typ": "JWT"})
    + "."
    + _b64url({"sub": "1234567890", "name": "Jane Doe", "iat": 1516239022})
    + "."
    + _random(43)
)
_BEARER = _random(40)
_BASIC = base64.b64encode(b"alice:hunter2-basic").decode()
_URL_PASSWORD = "Pg-" + _random(16)
_TEXT_PASSWORD = "pw-" + _random(12)
_WEBHOOK_PATH = "T" + _random(10) + "/B" + _random(10) + "/" + _random(24)
_ACCOUNT_KEY = base64.b64encode(_random(64).encode()).decode()
_SAS_SIG = _random(43) + "%3D"

# label -> (text that contains the secret, the substrings that must never be written)
SECRET_SHAPES: dict[str, tuple[str, tuple[str, ...]]] = {
    "aws_access_key_id": _token("AK" + "IA", 16, _UPPER_DIGITS),
    "aws_temporary_key_id": _token("AS" + "IA", 16, _UPPER_DIGITS),
    "gcp_api_key": _token("AI" + "za", 35),
    "github_classic_token": _token("gh" + "p_", 36),
    "github_oauth_token": _token("gh" + "o_", 36),
    "github_user_token": _token("gh" + "u_", 36),
    "github_server_token": _token("gh" + "s_", 36),
    "github_refresh_token": _token("gh" + "r_", 36),
    "github_fine_grained_token": _token("github" + "_pat_" + _random(22) + "_", 59),
    "gitlab_token": _token("gl" + "pat-", 20),
    "slack_bot_token": _token("xo" + "xb-1234567890-1234567890123-", 24),
    "slack_user_token": _token("xo" + "xp-1234567890-1234567890123-", 24),
    "slack_app_token": _token("xo" + "xa-2-", 30),
    "slack_refresh_token": _token("xo" + "xr-", 30),
    "slack_legacy_token": _token("xo" + "xs-", 30),
    "slack_webhook": _shape(
        "https://hooks.slack" + ".com/services/" + _WEBHOOK_PATH, _WEBHOOK_PATH
    ),
    "openai_key": _token("s" + "k-", 48),
    "openai_project_key": _token("s" + "k-proj-", 100),
    "anthropic_key": _token("s" + "k-ant-api03-", 93),
    "stripe_key": _token("s" + "k_live_", 24),
    "huggingface_token": _token("h" + "f_", 34),
    "jwt": _shape(_JWT),
    "pem_rsa_private_key": _pem("RSA PRIVATE " + "KEY"),
    "pem_pkcs8_private_key": _pem("PRIVATE " + "KEY"),
    "pem_ec_private_key": _pem("EC PRIVATE " + "KEY"),
    "pem_openssh_private_key": _pem("OPENSSH PRIVATE " + "KEY"),
    "pgp_private_key_block": _pem("PGP PRIVATE " + "KEY BLOCK"),
    "bearer_header": _shape("Authorization: Bearer " + _BEARER, _BEARER),
    "bearer_value": _shape("Bearer " + _BEARER, _BEARER),
    "basic_auth": _shape("Basic " + _BASIC, _BASIC),
    "url_password": _shape(
        f"postgresql://admin:{_URL_PASSWORD}@db.internal:5432/runs", _URL_PASSWORD
    ),
    "url_password_with_at": _shape(f"https://bob:{_URL_PASSWORD}@x@host.example/", _URL_PASSWORD),
    "password_assignment": _shape(f"password={_TEXT_PASSWORD}", _TEXT_PASSWORD),
    "token_in_query_string": _shape(
        f"https://api.example/v1?access_token={_TEXT_PASSWORD}&x=1", _TEXT_PASSWORD
    ),
    "password_in_dict_repr": _shape(f"{{'db_password': '{_TEXT_PASSWORD}'}}", _TEXT_PASSWORD),
    "password_in_json": _shape(f'{{"password": "{_TEXT_PASSWORD}"}}', _TEXT_PASSWORD),
    "azure_account_key": _shape(
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={_ACCOUNT_KEY};Endpoint",
        _ACCOUNT_KEY,
    ),
    "azure_sas_signature": _shape(
        f"https://acct.blob.core.windows.net/c/f.pt?sv=2022-11-02&sig={_SAS_SIG}&se=x", _SAS_SIG
    ),
    "email": _shape("jane.doe+runs@example.co.uk"),
}

SECRET_KEYS = [
    *("password", "passwd", "pwd", "passphrase", "secret", "client_secret", "token"),
    *("access_token", "refresh_token", "bearer_token", "auth_token", "hf_token", "HF_TOKEN"),
    *("hfToken", "github_token", "GITHUB_TOKEN", "HF_HUB_TOKEN", "aws_session_token", "my_token"),
    *("api_key", "apikey", "apiKey", "APIKey", "API-Key", "API_KEY", "x-api-key", "X-API-KEY"),
    *("OPENAI_API_KEY", "wandb_api_key", "WANDB_API_KEY", "access_key", "AWS_ACCESS_KEY_ID"),
    *("AWS_SECRET_ACCESS_KEY", "private_key", "privateKey", "credential", "credentials"),
    *("GOOGLE_APPLICATION_CREDENTIALS", "auth", "authorization", "Authorization"),
    *("Proxy-Authorization", "cookie", "Cookie", "Set-Cookie", "session_key", "sessionKey"),
    *("session_id", "sessionid", "SESSIONID", "db_password", "DB_PASSWORD", "dbPassword"),
    *("mysqlpassword", "connection_string", "webhook_url", "X-Auth-Token", "csrftoken"),
]

ORDINARY_KEYS = [
    *("loss", "lr", "step", "epoch", "split", "max_tokens", "tokens_per_s", "num_tokens"),
    *("token_count", "tokenizer", "tokenizer_name", "n_tokens", "tokens_seen", "max_new_tokens"),
    *("prompt_tokens", "completion_tokens", "special_tokens", "pad_token", "eos_token"),
    *("bos_token", "pad_token_id", "token_type_ids", "author", "authors", "auth_method"),
    *("auth_type", "authenticated", "session", "session_name", "password_min_length"),
    *("secret_name", "token_type", "key", "keys", "keyword", "sort_key", "rng_key", "monitor_key"),
    *("primary_key", "public_key", "passes", "num_passes", "forward_pass_s", "api_version"),
    *("api_base", "access_time", "keyframe", "hf_model", "github_repo", "wandb_project"),
    *("cookiecutter_template", "secretary", "is_secret", "private_key_path", "hf_token_env"),
]

_SHA256 = hashlib.sha256(b"checkpoint").hexdigest()
ORDINARY_STRINGS = [
    *("", "train", "val", "ok", "resnet50", "bert-base-uncased", "meta-llama/Llama-2-7b-hf"),
    _SHA256,
    f"sha256:{_SHA256}",
    hashlib.md5(b"checkpoint").hexdigest(),
    hashlib.sha1(b"commit").hexdigest(),
    str(uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)),
    "20260501T120000Z-4242-a1b2c3",
    "/data/imagenet/train/n01440764/ILSVRC2012_val_00000293.JPEG",
    "C:\\Users\\alice\\runs\\exp-3\\ckpt.pt",
    *("cuda:0", "sk", "skip-connections", "sk-learn-baseline-2024-05-01-lr0"),
    *("mask-rcnn-resnet50-fpn-3x-coco-2017", "wikitext-103-raw-v1", "2026-05-01T12:00:00+00:00"),
    "loss went from 0.91 to 0.41 at step 1200",
    "AdamW(lr=3e-4, betas=(0.9, 0.999), weight_decay=0.01)",
    *("nvcr.io/nvidia/pytorch:24.01-py3", "https://huggingface.co/datasets/wikitext"),
    *("s3://bucket/ckpt/step-1200.pt", "git@github.com:org/repo.git", "Bearer token"),
    *("Basic ResNet50 block", "token: <pad>", "max_tokens=2048", "pad_token=</s>"),
    *("Key: train/loss", "session=3", "hf_home_cache_directory_name", "ASIAN-dataset-v2", "eyJ"),
    *("torchrun --nproc_per_node=8 train.py --lr=3e-4", "3.14", "1e-4", "numpy==1.26.4"),
    *("@torch.compile", "root@10.0.0.1", "tokens_per_s=12345.6", "[redacted]"),
]


def _written(value: object) -> str:
    """Everything a sink could see of *value*: its JSON and its repr."""
    return orjson.dumps(value).decode() + repr(value)


class TestSecretShapes:
    @pytest.mark.parametrize(("text", "secrets"), SECRET_SHAPES.values(), ids=SECRET_SHAPES)
    def test_secret_in_a_sentence_is_redacted(self, text: str, secrets: tuple[str, ...]) -> None:
        message = f"RuntimeError: request failed with {text} (retrying)"

        result = redact_text(message)

        assert REDACTED in result
        assert not [secret for secret in secrets if secret in result]

    @pytest.mark.parametrize(("text", "secrets"), SECRET_SHAPES.values(), ids=SECRET_SHAPES)
    def test_secret_alone_as_a_value_is_redacted(self, text: str, secrets: tuple[str, ...]) -> None:
        result = redact_text(text)

        assert not [secret for secret in secrets if secret in result]

    @pytest.mark.parametrize(("text", "secrets"), SECRET_SHAPES.values(), ids=SECRET_SHAPES)
    def test_secret_nested_in_dicts_lists_and_tuples_is_redacted(
        self, text: str, secrets: tuple[str, ...]
    ) -> None:
        record = {"config": {"runs": [{"note": ("x", f"see {text}")}], "plain": text}}

        written = _written(redact(record))

        assert not [secret for secret in secrets if secret in written]

    @pytest.mark.parametrize(("text", "secrets"), SECRET_SHAPES.values(), ids=SECRET_SHAPES)
    def test_secret_in_argv_is_redacted(self, text: str, secrets: tuple[str, ...]) -> None:
        argv = ["train.py", text, f"--note={text}", "--note", text]

        written = _written(redact_argv(argv))

        assert not [secret for secret in secrets if secret in written]

    @pytest.mark.parametrize(("text", "secrets"), SECRET_SHAPES.values(), ids=SECRET_SHAPES)
    def test_secret_in_a_record_field_is_redacted(
        self, text: str, secrets: tuple[str, ...]
    ) -> None:
        fields: dict[str, object] = {"step": 3, "message": text, "tags": [text]}

        written = _written(redact_fields(fields))

        assert not [secret for secret in secrets if secret in written]

    def test_url_password_is_replaced_and_user_and_host_are_kept(self) -> None:
        result = redact_text("postgresql://admin:hunter2@db.internal:5432/runs")

        assert result == "postgresql://admin:[redacted]@db.internal:5432/runs"

    def test_bearer_token_keeps_the_scheme_word(self) -> None:
        result = redact_text("Authorization: Bearer " + _BEARER)

        assert result == "Authorization: Bearer [redacted]"

    def test_key_value_in_text_redacts_only_the_value(self) -> None:
        result = redact_text("connect(host='db', password='hunter2', port=5432)")

        assert result == "connect(host='db', password='[redacted]', port=5432)"

    def test_pem_block_without_end_line_is_redacted_to_the_end_of_the_text(self) -> None:
        pem, _ = _pem("RSA PRIVATE " + "KEY")
        truncated = pem.rsplit("\n", 2)[0]

        result = redact_text("key file: " + truncated)

        assert result == "key file: " + REDACTED

    def test_pem_block_with_escaped_newlines_is_redacted(self) -> None:
        pem, lines = _pem("PRIVATE " + "KEY")
        escaped = json.dumps({"private_key_data": pem})

        result = redact_text(escaped)

        assert not [line for line in lines if line in result]

    def test_email_address_is_redacted_as_personal_data(self) -> None:
        result = redact_text("contact jane.doe@example.com for access")

        assert result == "contact [redacted] for access"

    def test_token_glued_inside_a_longer_word_is_not_a_token(self) -> None:
        text = "task-" + "s" + "k-" + "aaaaaaaaaaBBBBBBBBBB0123456789"

        assert redact_text(text) is text

    def test_secret_key_matching_is_case_insensitive_in_text(self) -> None:
        result = redact_text("HF_TOKEN=abc123 DB_PASSWORD: xyz")

        assert result == "HF_TOKEN=[redacted] DB_PASSWORD: [redacted]"


class TestSecretKeys:
    @pytest.mark.parametrize("key", SECRET_KEYS)
    def test_key_naming_a_secret_is_secret(self, key: str) -> None:
        assert is_secret_key(key)

    @pytest.mark.parametrize("key", ORDINARY_KEYS)
    def test_ordinary_training_key_is_not_secret(self, key: str) -> None:
        assert not is_secret_key(key)

    @pytest.mark.parametrize("key", SECRET_KEYS)
    def test_value_under_secret_key_is_redacted_at_any_depth(self, key: str) -> None:
        value = f"value-of-{key}-{_random(8)}"
        config = {"model": {"hub": [{"settings": {key: value}}]}}

        written = _written(redact(config))

        assert value not in written
        assert REDACTED in written

    @pytest.mark.parametrize("value", [1234, None, ["a", "b"], {"user": "u", "pw": "p"}, 3.5])
    def test_value_under_secret_key_is_redacted_whatever_its_type(self, value: object) -> None:
        result = redact({"api_key": value})

        assert result == {"api_key": REDACTED}

    def test_secret_key_is_recognised_in_a_non_string_dict_key(self) -> None:
        class Key:
            def __str__(self) -> str:
                return "password"

        key = Key()

        assert redact({key: "hunter2"}) == {key: REDACTED}


class TestOrdinaryFields:
    @pytest.mark.parametrize("text", ORDINARY_STRINGS)
    def test_ordinary_string_is_returned_unchanged(self, text: str) -> None:
        assert redact_text(text) is text

    def test_ordinary_training_record_is_returned_as_the_same_object(self) -> None:
        record: dict[str, object] = {
            "step": 1200,
            "loss": 0.412,
            "lr": 3e-4,
            "tokens_per_s": 12345.6,
            "max_tokens": 2048,
            "split": "train",
            "run_id": "20260501T120000Z-4242-a1b2c3",
            "checkpoint_sha256": _SHA256,
            "git_commit": hashlib.sha1(b"commit").hexdigest(),
            "tokenizer": {"name": "bert-base-uncased", "pad_token": "[PAD]"},
            "strings": ORDINARY_STRINGS,
            "keys": dict.fromkeys(ORDINARY_KEYS, "value"),
        }

        assert redact(record) is record
        assert redact_fields(record) is record

    def test_ordinary_argv_is_unchanged(self) -> None:
        argv = [
            "train.py",
            "--lr",
            "3e-4",
            "--max-tokens",
            "2048",
            "--tokenizer",
            "bert",
            "-p",
            "8",
        ]

        assert redact_argv(argv) == argv


class TestArgv:
    @pytest.mark.parametrize(
        ("argv", "expected"),
        [
            (["--token", "abc"], ["--token", REDACTED]),
            (["--token=abc"], [f"--token={REDACTED}"]),
            (["--api-key=abc"], [f"--api-key={REDACTED}"]),
            (["--password", "abc"], ["--password", REDACTED]),
            (["--hf_token=abc"], [f"--hf_token={REDACTED}"]),
            (["-password", "abc"], ["-password", REDACTED]),
            (["HF_TOKEN=abc"], [f"HF_TOKEN={REDACTED}"]),
            (["db.password=abc"], [f"db.password={REDACTED}"]),
            (["+db.password=abc"], [f"+db.password={REDACTED}"]),
        ],
    )
    def test_secret_option_value_is_hidden(self, argv: list[str], expected: list[str]) -> None:
        assert redact_argv(argv) == expected

    def test_flag_followed_by_another_option_hides_nothing(self) -> None:
        argv = ["--use-auth-token", "--model", "bert"]

        assert redact_argv(argv) == argv

    def test_secret_option_at_the_end_is_kept(self) -> None:
        assert redact_argv(["train.py", "--password"]) == ["train.py", "--password"]

    def test_short_option_p_is_not_treated_as_a_password(self) -> None:
        assert redact_argv(["-p", "8"]) == ["-p", "8"]

    def test_empty_secret_value_is_kept(self) -> None:
        assert redact_argv(["--token=", "HF_TOKEN="]) == ["--token=", "HF_TOKEN="]

    def test_redact_argv_returns_a_new_list_and_leaves_the_input(self) -> None:
        argv = ("train.py", "--token", "abc")

        result = redact_argv(argv)

        assert isinstance(result, list)
        assert argv == ("train.py", "--token", "abc")


class TestRedactorOptions:
    def test_extra_key_as_a_plain_word_matches_whole_words_in_any_style(self) -> None:
        redactor = Redactor(extra_keys=["ssn"])

        assert redactor.is_secret_key("user_ssn")
        assert redactor.is_secret_key("SSN")
        assert redactor.is_secret_key("ssnNumber")
        assert not redactor.is_secret_key("lessons")

    def test_extra_key_as_a_regex_is_searched_in_the_snake_case_key(self) -> None:
        redactor = Redactor(extra_keys=[r"^internal_.*_id$"])

        assert redactor.is_secret_key("internalUserId")
        assert not redactor.is_secret_key("user_id")

    def test_extra_value_patterns_replace_matches_in_strings(self) -> None:
        redactor = Redactor(extra_values=[r"ACME-\d{6}", re.compile(r"corp-[a-z]+", re.I)])

        result = redactor.redact({"note": "ticket ACME-123456 by CORP-alice"})

        assert result == {"note": f"ticket {REDACTED} by {REDACTED}"}

    def test_allowed_key_keeps_its_value(self) -> None:
        redactor = Redactor(allow=["secret_sauce"])
        record = {"secret_sauce": "2048", "token": "abc"}

        assert redactor.redact(record) == {"secret_sauce": "2048", "token": REDACTED}

    def test_allowed_key_still_has_credential_text_redacted(self) -> None:
        redactor = Redactor(allow=["password_hint"])

        result = redactor.redact({"password_hint": "mail jane.doe@example.com"})

        assert result == {"password_hint": f"mail {REDACTED}"}

    def test_default_rules_still_apply_with_extra_options(self) -> None:
        redactor = Redactor(extra_keys=["ssn"])

        assert redactor.redact({"api_key": "x", "ssn": "y", "lr": 0.1}) == {
            "api_key": REDACTED,
            "ssn": REDACTED,
            "lr": 0.1,
        }

    @pytest.mark.parametrize("option", ["extra_keys", "extra_values", "allow"])
    def test_a_single_string_instead_of_a_list_is_refused(self, option: str) -> None:
        with pytest.raises(TypeError, match=rf"{option} takes a list.*{option}=\['ssn'\]"):
            Redactor(**{option: "ssn"})

    def test_invalid_regex_is_refused_with_the_pattern_named(self) -> None:
        with pytest.raises(FieldError, match=r"extra_values pattern '\(unclosed'.*re\.escape"):
            Redactor(extra_values=["(unclosed"])

    def test_repr_shows_the_options(self) -> None:
        redactor = Redactor(extra_values=["x+"], allow=["b", "a"])

        assert repr(redactor) == "Redactor(extra_keys=[], extra_values=['x+'], allow=['a', 'b'])"

    def test_module_functions_use_the_default_redactor(self) -> None:
        assert DEFAULT_REDACTOR.redact({"token": "x"}) == redact({"token": "x"})
        assert DEFAULT_REDACTOR.is_secret_key("api_key") is is_secret_key("api_key")


class TestStructures:
    def test_redact_does_not_mutate_its_input(self) -> None:
        record = {"a": [{"password": "x"}, ("mail jane@example.com",)], "b": {"token": 1}}
        before = copy.deepcopy(record)

        redact(record)

        assert record == before

    def test_unchanged_branches_are_shared_not_copied(self) -> None:
        clean = {"lr": 0.1, "layers": [1, 2, 3]}
        record = {"clean": clean, "token": "x"}

        result = redact(record)

        assert isinstance(result, dict)
        assert result["clean"] is clean

    def test_tuples_stay_tuples_and_sets_stay_sets(self) -> None:
        record = {"t": ("a", "jane@example.com"), "s": {"jane@example.com", "b"}}

        assert redact(record) == {"t": ("a", REDACTED), "s": {REDACTED, "b"}}

    def test_dataclass_with_a_secret_becomes_a_dict_of_its_fields(self) -> None:
        @dataclasses.dataclass
        class Config:
            lr: float
            hf_token: str

        assert redact({"config": Config(0.1, "abc")}) == {
            "config": {"lr": 0.1, "hf_token": REDACTED}
        }

    def test_dataclass_without_secrets_is_returned_as_is(self) -> None:
        @dataclasses.dataclass
        class Config:
            lr: float

        config = Config(0.1)

        assert redact(config) is config

    def test_numbers_and_unknown_objects_are_returned_as_is(self) -> None:
        marker = object()
        record = {"n": 1, "x": 2.5, "flag": True, "none": None, "obj": marker, "raw": b"\x00"}

        assert redact(record) is record

    def test_read_only_mapping_with_a_secret_becomes_a_dict(self) -> None:
        mapping = MappingProxyType({"password": "x", "lr": 0.1})

        assert redact(mapping) == {"password": REDACTED, "lr": 0.1}

    def test_top_level_string_is_redacted(self) -> None:
        assert redact("mail jane@example.com") == f"mail {REDACTED}"


class TestCyclesAndDepth:
    def test_cyclic_dict_with_a_secret_is_redacted_and_the_cycle_marked(self) -> None:
        record: dict[str, object] = {"password": "hunter2", "lr": 0.1}
        record["self"] = record

        result = redact(record)

        assert result == {"password": REDACTED, "lr": 0.1, "self": "<cycle>"}
        assert "hunter2" not in _written(result)
        assert record["password"] == "hunter2"

    def test_cyclic_list_without_secrets_is_returned_as_is(self) -> None:
        items: list[object] = ["train", 1]
        items.append(items)

        assert redact(items) is items

    def test_cycle_in_a_record_field_does_not_leak_the_original(self) -> None:
        inner: dict[str, object] = {"token": "abc"}
        inner["again"] = inner
        fields: dict[str, object] = {"step": 1, "inner": inner}

        result = redact_fields(fields)

        assert "abc" not in _written(result)

    def test_shared_subobject_is_not_a_cycle(self) -> None:
        shared = {"token": "abc"}

        result = redact({"a": shared, "b": shared})

        assert result == {"a": {"token": REDACTED}, "b": {"token": REDACTED}}

    def test_deep_nesting_does_not_raise_and_hides_what_is_below_the_limit(self) -> None:
        nested: object = ["mail jane@example.com"]
        for _ in range(10_000):
            nested = [nested]

        result = redact(nested)

        assert "jane@example.com" not in _written(result)

    def test_nesting_within_the_limit_is_kept(self) -> None:
        nested: object = "train"
        for _ in range(50):
            nested = {"next": nested}

        assert redact(nested) is nested


class TestRedactFields:
    def test_returns_the_same_dict_when_nothing_changed(self) -> None:
        fields: dict[str, object] = {"step": 1, "loss": 0.4, "split": "train"}

        assert redact_fields(fields) is fields

    def test_replaces_the_value_of_a_secret_key(self) -> None:
        fields: dict[str, object] = {"step": 1, "api_key": 42}

        assert redact_fields(fields) == {"step": 1, "api_key": REDACTED}

    def test_does_not_mutate_the_record(self) -> None:
        fields: dict[str, object] = {"step": 1, "note": "jane@example.com", "cfg": {"token": "x"}}
        before = copy.deepcopy(fields)

        redact_fields(fields)

        assert fields == before

    def test_keeps_key_order(self) -> None:
        fields: dict[str, object] = {"b": 1, "token": "x", "a": "y"}

        assert list(redact_fields(fields)) == ["b", "token", "a"]


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text()
)
_secret_texts = st.sampled_from([text for text, _ in SECRET_SHAPES.values()])
_mixed_texts = st.builds(lambda a, s, b: f"{a} {s} {b}", st.text(), _secret_texts, st.text())
_keys = st.text() | st.sampled_from(SECRET_KEYS + ORDINARY_KEYS)
_json_values = st.recursive(
    _json_scalars | _mixed_texts,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(_keys, children, max_size=4)
        | st.tuples(children, children)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_json_values)
def test_redact_never_raises_never_mutates_and_stays_encodable(value: object) -> None:
    before = copy.deepcopy(value)

    result = redact(value)

    assert value == before
    orjson.dumps(result)
    assert redact(result) == result


@settings(max_examples=200, deadline=None)
@given(st.text(), st.sampled_from(list(SECRET_SHAPES.values())), st.text())
def test_planted_secret_never_survives_surrounding_text(
    before: str, shape: tuple[str, tuple[str, ...]], after: str
) -> None:
    text, secrets = shape

    result = redact_text(f"{before}\n{text}\n{after}")

    assert not [secret for secret in secrets if secret in result and secret not in before + after]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_redact_text_is_idempotent_and_never_raises(text: str) -> None:
    once = redact_text(text)

    assert redact_text(once) == once


def test_importing_redaction_loads_no_heavy_module() -> None:
    code = (
        "import sys, runlines.redaction; "
        "print(sorted({'numpy', 'pandas', 'torch'} & set(sys.modules)))"
    )

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout

    assert out.strip() == "[]"


def test_credential_shape_after_an_ordinary_key_is_still_redacted() -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"

    redacted = DEFAULT_REDACTOR.redact_text(f"Client(key={token}, sort_key=name)")

    assert redacted == "Client(key=[redacted], sort_key=name)"
