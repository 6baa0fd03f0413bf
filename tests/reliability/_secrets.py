"""A corpus of secrets for the leak tests, assembled at run time from a seeded generator.

The source holds no string a secret scanner would flag, and every run tests the same values.
Each entry maps a label to (a text that holds the secret, the substrings that must never be
written anywhere).
"""

from __future__ import annotations

import base64
import json
import random
import string
from typing import Final

_rng = random.Random(20260601)
_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits


def _random(n: int, alphabet: str = _ALNUM) -> str:
    chars = [_rng.choice(alphabet) for _ in range(n)]
    if alphabet == _ALNUM:
        chars[:3] = ["q", "X", "4"]  # both cases and a digit, as real keys have
    return "".join(chars)


def _b64url(document: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


def _token(prefix: str, n: int, alphabet: str = _ALNUM) -> tuple[str, tuple[str, ...]]:
    text = prefix + _random(n, alphabet)
    return text, (text,)


_PEM_LINES = tuple(_random(64) for _ in range(3))
_PEM_LABEL = "RSA PRIVATE " + "KEY"
_PEM = "\n".join([f"-----BEGIN {_PEM_LABEL}-----", *_PEM_LINES, f"-----END {_PEM_LABEL}-----"])
_JWT = ".".join(
    [_b64url({"alg": "HS256", "typ": "JWT"}), _b64url({"sub": "42", "name": "Ada"}), _random(43)]
)
_BEARER = _random(40)
_URL_PASSWORD = "Pw-" + _random(16)
_TEXT_PASSWORD = "tx-" + _random(14)
_WEBHOOK = "T" + _random(10) + "/B" + _random(10) + "/" + _random(24)

SHAPES: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "aws_key_id": _token("AK" + "IA", 16, _UPPER_DIGITS),
    "github_token": _token("gh" + "p_", 36),
    "github_fine_grained": _token("github" + "_pat_" + _random(22) + "_", 59),
    "slack_bot_token": _token("xo" + "xb-1234567890-1234567890123-", 24),
    "slack_webhook": (
        "https://hooks.slack" + ".com/services/" + _WEBHOOK,
        (_WEBHOOK,),
    ),
    "openai_key": _token("s" + "k-proj-", 60),
    "anthropic_key": _token("s" + "k-ant-api03-", 80),
    "huggingface_token": _token("h" + "f_", 34),
    "jwt": (_JWT, (_JWT,)),
    "pem_private_key": (_PEM, _PEM_LINES),
    "bearer": ("Authorization: Bearer " + _BEARER, (_BEARER,)),
    "url_password": (f"postgresql://admin:{_URL_PASSWORD}@db.internal:5432/runs", (_URL_PASSWORD,)),
    "password_in_text": (f"password={_TEXT_PASSWORD}", (_TEXT_PASSWORD,)),
    "email": ("ada.lovelace+runs@example.org", ("ada.lovelace+runs@example.org",)),
}

#: A value with no shape of its own: safe only under a key that names a secret.
KEYED: Final = "plain-" + _random(20)
SECRET_KEYS: Final = ("password", "api_key", "HF_TOKEN", "client_secret", "auth", "db_password")


def every_secret() -> list[str]:
    """Return every substring that must never be written."""
    found = [part for _, parts in SHAPES.values() for part in parts]
    return [*found, KEYED]


def leaks(text: str) -> list[str]:
    """Return the labels of the secrets that appear in *text*."""
    labels = [label for label, (_, parts) in SHAPES.items() if any(p in text for p in parts)]
    return labels + (["keyed"] if KEYED in text else [])


def sentence(label: str) -> str:
    """Return a message that carries the secret *label* in the middle of ordinary words."""
    return f"request failed with {SHAPES[label][0]} (retrying)"
