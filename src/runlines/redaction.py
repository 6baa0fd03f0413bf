"""Redaction of secrets and personal data, by key name and by value shape, before encoding.

Fields, config, argv and error text all pass through here; nothing is read or written.
"""

from __future__ import annotations

import binascii
import functools
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

from runlines.errors import FieldError

__all__ = [
    "DEFAULT_REDACTOR",
    "REDACTED",
    "Redactor",
    "is_secret_key",
    "redact",
    "redact_argv",
    "redact_fields",
    "redact_text",
]

REDACTED: Final = "[redacted]"
"""What a secret is replaced with."""

_CYCLE: Final = "<cycle>"  # what the encoder writes at the repeat of a cycle
_MAX_DEPTH: Final = 100  # deeper containers cannot be checked without deep recursion
_KEY_CACHE_SIZE: Final = 4096

# --- Keys -------------------------------------------------------------------------------------

# Splits apiKey, APIKey, api-key, API_KEY, x.api.key into words.
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

# A word that names a secret wherever it appears in a key.
_SECRET_WORDS: Final = frozenset(
    {
        "password",
        "passwords",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "secrets",
        "credential",
        "credentials",
        "creds",
        "auth",
        "authorization",
        "cookie",
        "cookies",
        "webhook",
        "privkey",
        "sig",
    }
)
# A word written without separators that ends like a secret: dbpassword, clientsecret, apikey.
_SECRET_ENDINGS: Final = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "sessionkey",
    "sessionid",
    "accesstoken",
    "authtoken",
    "refreshtoken",
    "sessiontoken",
    "credential",
    "credentials",
)
# Words before "key" that make it a credential (api_key); other keys are not (sort_key, rng_key).
_KEY_OWNERS: Final = frozenset(
    {
        *("api", "access", "private", "secret", "session", "client", "encryption", "decryption"),
        *("signing", "sign", "master", "ssh", "gpg", "pgp", "license", "licence", "account"),
        *("storage", "subscription", "consumer", "auth", "app", "shared", "hmac", "aes", "rsa"),
        *("deploy", "admin", "service", "crypto", "root", "openai", "anthropic", "wandb", "comet"),
        *("neptune", "cohere", "mistral", "groq", "hf", "huggingface", "replicate", "together"),
        *("pinecone", "stripe", "aws", "azure", "gcp", "google", "gemini", "mlflow", "kaggle"),
        *("clearml", "github", "gitlab", "slack", "deepseek"),
    }
)
# Words before "token" or "tokens" that make it a credential (hf_token, access_tokens).
_TOKEN_OWNERS: Final = frozenset(
    {
        *("access", "auth", "refresh", "bearer", "api", "id", "csrf", "xsrf", "session", "oauth"),
        *("hf", "huggingface", "hub", "github", "gh", "gitlab", "slack", "bot", "wandb", "openai"),
        *("anthropic", "npm", "pypi", "docker", "registry", "personal", "pat", "secret", "client"),
        *("security", "app", "service", "sas", "jwt", "discord", "telegram", "twilio", "aws"),
        *("azure", "gcp", "google", "kaggle", "comet", "neptune", "mlflow", "clearml", "cohere"),
        *("replicate", "mistral", "groq", "together", "pinecone"),
    }
)
# Words before a final "token" that make it a text token, not a credential (pad_token, max_token).
_TEXT_TOKEN_WORDS: Final = frozenset(
    {
        *("pad", "eos", "bos", "unk", "sep", "cls", "mask", "special", "start", "end", "stop"),
        *("eot", "eom", "boi", "eoi", "image", "img", "audio", "video", "vision", "sentinel"),
        *("placeholder", "decoder", "max", "min", "num", "n", "total", "per", "avg", "mean"),
        *("next", "prev", "previous", "last", "first", "current", "target", "pred", "predicted"),
        *("input", "output", "generated", "sampled", "sample", "top", "added", "extra", "padding"),
        *("prompt", "completion", "cached", "reasoning", "begin", "think", "tool", "system"),
        *("assistant", "default", "unknown", "separator", "bad", "word", "subword", "char", "byte"),
    }
)
# A final word that says the key describes a secret rather than holds it (password_min_length).
# Not "min" or "max": aggregation derives <key>_min and <key>_max from a secret <key>'s values.
_DESCRIBING_WORDS: Final = frozenset(
    {
        *("length", "len", "count", "counts", "size", "limit", "type", "kind"),
        *("policy", "file", "path", "dir", "env", "var", "name", "names", "method", "methods"),
        *("mode", "scheme", "provider", "enabled", "required", "expiry", "expires", "expiration"),
        *("ttl", "timeout", "format", "version", "prefix", "strength", "endpoint", "host"),
        *("server", "user", "username"),
    }
)
_FLAG_WORDS: Final = frozenset({"is", "has"})  # is_secret, has_password hold booleans
_SECRET_PAIRS: Final = frozenset({("session", "id"), ("connection", "string"), ("conn", "str")})
_FLAT_SECRETS: Final = frozenset(
    {owner + "token" for owner in _TOKEN_OWNERS} | {owner + "key" for owner in _KEY_OWNERS}
)


def _key_words(key: str) -> list[str]:
    """Return the lower-case words of a key in any case or separator style."""
    return [word.lower() for word in _WORD.findall(key)]


def _word_is_secret(words: list[str], index: int) -> bool:
    word = words[index]
    before = words[index - 1] if index else ""
    if word in _SECRET_WORDS or word in _FLAT_SECRETS or word.endswith(_SECRET_ENDINGS):
        return True
    if word in ("key", "keys", "tokens"):
        return before in (_TOKEN_OWNERS if word == "tokens" else _KEY_OWNERS)
    if word == "token":  # hf_token, auth_token and token are secrets; pad_token, token_id are not
        is_last = index == len(words) - 1
        return before in _TOKEN_OWNERS or (is_last and before not in _TEXT_TOKEN_WORDS)
    return (before, word) in _SECRET_PAIRS


def _names_secret(words: list[str]) -> bool:
    """Return True when a key made of *words* names a secret."""
    if not words or words[0] in _FLAG_WORDS:
        return False
    if len(words) > 1 and words[-1] in _DESCRIBING_WORDS:
        return False
    return any(_word_is_secret(words, index) for index in range(len(words)))


_T = TypeVar("_T")


def _listed(items: Iterable[_T], option: str) -> tuple[_T, ...]:
    if isinstance(items, (str, re.Pattern)):
        msg = f"{option} takes a list, not a single value: {option}=[{items!r}]"
        raise TypeError(msg)
    return tuple(items)


def _key_pattern(pattern: str) -> re.Pattern[str]:
    """Compile an extra key pattern: a plain word matches whole words of the normalised key."""
    if re.fullmatch(r"[A-Za-z0-9_]+", pattern):
        words = "_".join(_key_words(pattern))
        return re.compile(rf"(?:^|_){re.escape(words)}(?:_|$)")
    return _compile(pattern, "extra_keys", re.IGNORECASE)


def _compile(pattern: str | re.Pattern[str], option: str, flags: int = 0) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern, flags)
    except re.error as err:
        msg = (
            f"{option} pattern {pattern!r} is not a valid regular expression ({err}); "
            "fix it, or pass re.escape(text) to match the text literally"
        )
        raise FieldError(msg) from err


# --- Values -----------------------------------------------------------------------------------

# Cheap superset of every shape below: each branch starts with one rare character, so the regex
# engine skips ordinary text ("train", a sha256 digest, a path) at C speed. The shapes themselves
# are compiled on first use (functools.cache): the largest takes ~6 ms, which a run that never
# logs a suspicious string, and `import runlines`, must not pay.
_MAYBE_SECRET = re.compile(
    r"""@
    |=(?<=[dehlnstygDEHLNSTYG]=)|=(?<=[dehlnstygDEHLNSTYG]['"]=)|=(?<=\ =)
    |:(?<=[dehlnstygDEHLNSTYG]:)|:(?<=[dehlnstygDEHLNSTYG]['"]:)|:(?<=\ :)
    |_(?<=gh[pousr]_)|_(?<=github_pat_)|_(?<=hf_)|_(?<=[sr]k_)
    |-(?<=sk-)|-(?<=xox[abeprs]-)|-(?<=glpat-)|-----BEGIN
    |A(?:KIA|SIA|BIA|CCA|3T|Iza)|J(?<=eyJ)|B(?:earer|asic)\s|h(?=ooks\.slack\.com/)
    """,
    re.VERBOSE,
)

# The words that end a secret key in text (password=..., "api_key": ...); the whole key is then
# checked with is_secret_key. Every letter that ends one is in _MAYBE_SECRET's lookbehinds.
_ASSIGNED_WORDS: Final = tuple(
    sorted(
        {
            spelling
            for word in (
                *("password", "passwd", "passphrase", "pwd", "secret", "secrets", "token", "key"),
                *("auth", "authorization", "cookie", "cookies", "credential", "credentials"),
                *("creds", "sessionid", "session_id", "session-id", "sig"),
            )
            for spelling in (word, word.capitalize(), word.upper())
        }
        | {"sessionId", "SessionId", "sessionID", "SessionID"},
        key=lambda word: (-len(word), word),
    )
)
_SCHEME = r"(?i:bearer|basic|token)[ \t]+"
_ASSIGNED_VALUE = (
    r"""['"]?[ \t]*[=:][ \t]*"""
    r"""(?:'[^'\n]+'|"[^"\n]+"|(?:"""
    + _SCHEME
    + r")?(?!"
    + _SCHEME
    + r""")[^\s'",;&<>(){}\[\]]+)"""
)


@functools.cache
def _assignment() -> re.Pattern[str]:
    """Return the pattern of a ``key=`` or ``"key": `` before a value, compiled on first use."""
    return re.compile(
        r"""(?P<key>[A-Za-z0-9_.-]*)(?P<sep>['"]?[ \t]*[=:][ \t]*)(?P<quote>['"]?)(?P<scheme>(?:"""
        + _SCHEME
        + r")?)"
    )


# Every branch starts with a literal character, so that the regex engine only tries positions
# holding one of those characters.
_SHAPES: Final = (
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*)",  # to the end when truncated
    r"Bearer[ \t]+[A-Za-z0-9._~+/-]+=*",
    r"Basic[ \t]+[A-Za-z0-9+/]{4,}={0,2}",
    r"A(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9])",  # AWS access key id
    r"AIza[0-9A-Za-z_-]{35}",  # Google API key
    r"gh[pousr]_[A-Za-z0-9]{36,}",
    r"github_pat_[A-Za-z0-9_]{22,}",
    r"glpat-[A-Za-z0-9_-]{20,}",
    r"xox[abeprs]-[A-Za-z0-9-]{10,}",
    r"sk_(?:live|test)_[A-Za-z0-9]{16,}",
    r"rk_(?:live|test)_[A-Za-z0-9]{16,}",
    r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",  # JWT
    r"sk-[A-Za-z0-9_-]{20,}",
    r"hf_[A-Za-z0-9_-]{20,}",
    r"hooks\.slack\.com/services/[A-Za-z0-9/]+",
)


def _shapes_pattern() -> str:
    """Join _SHAPES and the assignments as ``c(?:rest|rest)|...``, one group per first character."""
    groups: dict[str, list[str]] = {}
    for branch in _SHAPES:
        groups.setdefault(branch[0], []).append(branch[1:])
    words: dict[str, list[str]] = {}
    for word in _ASSIGNED_WORDS:  # longest first: "secrets" must be tried before "secret"
        words.setdefault(word[0], []).append(re.escape(word[1:]))
    for first, rests in words.items():
        groups.setdefault(first, []).append(f"(?:{'|'.join(rests)}){_ASSIGNED_VALUE}")
    return "|".join(f"{re.escape(first)}(?:{'|'.join(rests)})" for first, rests in groups.items())


@functools.cache
def _secret_shapes() -> re.Pattern[str]:
    """Return the credential shapes and secret assignments as one pattern, compiled on first use."""
    return re.compile(_shapes_pattern(), re.DOTALL)


@functools.cache
def _at_shapes() -> re.Pattern[str]:
    """Return the shapes around an "@", compiled on first use.

    They are matched one whitespace-delimited token at a time: their start (a scheme, an
    e-mail's user) is not a literal the regex engine could skip to.
    """
    return re.compile(
        r"""(?P<url>(?P<url_user>[A-Za-z][A-Za-z0-9+.-]*://[^:/@]*:)[^/]+@)
        |(?P<email>(?<![A-Za-z0-9._%+-])(?P<email_user>[A-Za-z0-9._%+-]+)
            @(?P<email_host>[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)
            \.(?P<email_tld>[A-Za-z]{2,})(?![A-Za-z0-9-]))
        """,
        re.VERBOSE,
    )


_TOKEN_END = re.compile(r"""[\s'"<>()\[\]{},;|`]""")
_SHORTEST_WORD_SHAPE: Final = 20  # AKIA + 16: the shortest shape made of letters and digits
_TOKEN_REACH: Final = 512  # how far back from an "@" its token may start
_KEY_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ARG_KEY = re.compile(r"[+~]*([A-Za-z_][A-Za-z0-9_.-]*)=")


def _is_random(text: str, *, needs_digit: bool) -> bool:
    """Return True when *text* mixes cases (and digits) as generated keys do, unlike slugs."""
    mixed = any(c.isupper() for c in text) and any(c.islower() for c in text)
    return mixed and (not needs_digit or any(c.isdigit() for c in text))


def _is_basic_credential(token: str) -> bool:
    """Return True when *token* is base64 of printable ``user:password`` text."""
    try:  # what base64.b64decode(token, validate=True) calls, without importing base64
        decoded = binascii.a2b_base64(token, strict_mode=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return ":" in decoded and decoded.isprintable()


_ATOMS: Final = frozenset({int, float, bool, type(None), bytes, complex})
_PLAIN_CONTAINERS: Final = frozenset({dict, list, tuple})


class Redactor:
    """Redacts secrets by key name and by value shape; the default is DEFAULT_REDACTOR."""

    __slots__ = ("_allow", "_extra_keys", "_extra_values", "_key_cache")

    def __init__(
        self,
        *,
        extra_keys: Iterable[str] = (),
        extra_values: Iterable[str | re.Pattern[str]] = (),
        allow: Iterable[str] = (),
    ) -> None:
        """Build a redactor with a project's additions.

        Args:
            extra_keys: more key patterns; a plain word matches whole words of a key in any
                case or separator style (``ssn`` matches ``user_ssn`` and ``SSN``, not
                ``lessons``), anything else is a regex searched in the key as snake_case.
            extra_values: regexes whose matches are replaced in every string value.
            allow: exact keys whose value is never redacted by key (its text still is).

        Raises:
            FieldError: a pattern is not a valid regular expression.
        """
        self._allow = frozenset(_listed(allow, "allow"))
        self._extra_keys = tuple(_key_pattern(p) for p in _listed(extra_keys, "extra_keys"))
        values = _listed(extra_values, "extra_values")
        self._extra_values = tuple(_compile(p, "extra_values") for p in values)
        self._key_cache: dict[str, bool] = {}

    def __repr__(self) -> str:
        keys = [p.pattern for p in self._extra_keys]
        values = [p.pattern for p in self._extra_values]
        allow = sorted(self._allow)
        return f"Redactor(extra_keys={keys!r}, extra_values={values!r}, allow={allow!r})"

    def is_secret_key(self, key: str) -> bool:
        """Return True when *key* names a secret (``api_key``, ``HF_TOKEN``); cached per key."""
        secret = self._key_cache.get(key)
        if secret is None:
            secret = self._check_key(key)
            if len(self._key_cache) >= _KEY_CACHE_SIZE:
                self._key_cache.clear()
            self._key_cache[key] = secret
        return secret

    def _check_key(self, key: str) -> bool:
        if key in self._allow:
            return False
        words = _key_words(key)
        normalised = "_".join(words)
        return any(p.search(normalised) for p in self._extra_keys) or _names_secret(words)

    def redact_text(self, text: str) -> str:
        """Return *text* with credential-shaped substrings and e-mail addresses replaced."""
        redacted = text
        # Short words ("train", "resnet50") skip the scan: every built-in shape needs 20
        # characters or one that is not a letter or digit.
        is_short_word = len(text) < _SHORTEST_WORD_SHAPE and text.isalnum()
        if not is_short_word and _MAYBE_SECRET.search(text) is not None:
            redacted = _secret_shapes().sub(self._replace, text)
            if "@" in redacted:
                redacted = _redact_at_shapes(redacted)
        for pattern in self._extra_values:
            redacted = pattern.sub(REDACTED, redacted)
        return text if redacted == text else redacted

    def _replace(self, match: re.Match[str]) -> str:
        """Return the replacement of one _secret_shapes() match (the match itself when harmless)."""
        text = match.group()
        if text.startswith("-----"):
            return REDACTED
        if text.startswith("Bearer"):
            token = text[6:].lstrip()
            plausible = len(token) >= 20 or not token.isalpha()  # not "Bearer authentication"
            return f"Bearer {REDACTED}" if plausible else text
        if text.startswith("Basic"):
            return f"Basic {REDACTED}" if _is_basic_credential(text[5:].lstrip()) else text
        if text.startswith("hooks."):
            return "hooks.slack.com/services/" + REDACTED
        if text.startswith(_ASSIGNED_WORDS):
            return self._replace_assignment(match)
        if _follows_word(match):  # task-sk-..., model_hf_...: part of a longer word
            return text
        if text.startswith(("sk-", "hf_")):  # not a slug such as sk-learn-baseline
            return REDACTED if _is_random(text[3:], needs_digit=text[0] == "s") else text
        return REDACTED

    def _replace_assignment(self, match: re.Match[str]) -> str:
        """Redact the value of ``key=value`` / ``key: value`` in text when the key is secret."""
        text = match.group()
        parts = _assignment().match(text)
        if parts is None:
            return text
        if not self.is_secret_key(_key_before(match) + parts["key"]):
            # An ordinary key ("key=", "token:"): its value may still hold a credential shape.
            head = parts.group()
            return head + _secret_shapes().sub(self._replace, text[len(head) :])
        return f"{parts.group()}{REDACTED}{parts['quote']}"

    def redact(self, value: object) -> object:
        """Return *value* with secrets redacted at any depth; *value* itself when none were found.

        Dict values under secret keys become REDACTED whatever their type; strings pass
        through redact_text; lists, tuples, sets and dataclasses are walked (a changed
        dataclass becomes a dict of its fields). Other objects are returned as is. The input
        is never mutated. Cycles become ``"<cycle>"`` and containers nested deeper than 100
        levels become REDACTED when anything had to change.
        """
        walk = _Walk(self, break_cycles=False)
        result = walk.value(value, 0)
        if walk.saw_cycle and result is not value:
            # The copy must not point back into the unredacted original.
            result = _Walk(self, break_cycles=True).value(value, 0)
        return result

    def redact_fields(self, fields: dict[str, object]) -> dict[str, object]:
        """Return a record's fields redacted; *fields* itself when nothing changed."""
        out: dict[str, object] | None = None
        cache = self._key_cache
        for key, value in fields.items():
            secret = cache.get(key)
            if secret is None:
                secret = self.is_secret_key(key)
            if secret:
                new: object = REDACTED
            elif type(value) is str:
                new = self.redact_text(value)
            elif type(value) in _ATOMS:
                continue
            else:
                new = self.redact(value)
            if new is not value:
                if out is None:
                    out = dict(fields)
                out[key] = new
        return fields if out is None else out

    def redact_argv(self, argv: Sequence[str]) -> list[str]:
        """Return a copy of a command line with secret options and credential-shaped text hidden.

        ``--token X``, ``--api-key=X``, ``-password X`` and env-like ``HF_TOKEN=X`` (or Hydra's
        ``db.password=X``) hide X when the option or key names a secret; a value that starts
        with ``--`` is the next option, not a value. Short options such as ``-p`` are ambiguous
        and not treated as secrets.
        """
        out: list[str] = []
        hide_next = False
        for arg in argv:
            if hide_next and not arg.startswith("--"):
                out.append(REDACTED)
            else:
                out.append(self._redact_arg(arg))
            hide_next = self._takes_secret_value(arg)
        return out

    def _takes_secret_value(self, arg: str) -> bool:
        """Return True for ``--token``-like options whose value is the next argument."""
        name = arg.lstrip("-")
        is_option = arg.startswith("-") and "=" not in arg and len(name) > 1
        return is_option and self.is_secret_key(name)

    def _redact_arg(self, arg: str) -> str:
        if arg.startswith("-") and "=" in arg:
            option, value = arg.split("=", 1)
            if value and self.is_secret_key(option.lstrip("-")):
                return f"{option}={REDACTED}"
        match = _ARG_KEY.match(arg)
        if match and match.end() < len(arg) and self.is_secret_key(match[1]):
            return f"{match.group()}{REDACTED}"
        return self.redact_text(arg)


def _follows_word(match: re.Match[str]) -> bool:
    """Return True when the match starts inside a longer word, so is not a token of its own."""
    start = match.start()
    return start > 0 and match.string[start - 1] in _KEY_CHARS


def _key_before(match: re.Match[str]) -> str:
    """Return the key characters just before *match* (``db_`` before ``password=...``)."""
    text, start = match.string, match.start()
    begin = start
    while begin > max(0, start - _TOKEN_REACH) and (
        text[begin - 1] in _KEY_CHARS or text[begin - 1] == "."
    ):
        begin -= 1
    return text[begin:start]


def _redact_at_shapes(text: str) -> str:
    """Return *text* with passwords in URLs and e-mail addresses replaced, token by token."""
    pieces: list[str] = []
    done = 0
    at = text.find("@")
    while at >= 0:
        begin = at
        while begin > max(done, at - _TOKEN_REACH) and not _TOKEN_END.match(text, begin - 1):
            begin -= 1
        stop = _TOKEN_END.search(text, at)
        end = len(text) if stop is None else stop.start()
        pieces += [text[done:begin], _at_shapes().sub(_replace_at, text[begin:end])]
        done = end
        at = text.find("@", end)
    pieces.append(text[done:])
    return "".join(pieces)


# Endings of files (best@epoch12.ckpt) that no e-mail domain ends with.
_FILE_ENDINGS: Final = frozenset(
    {
        *("ckpt", "safetensors", "bin", "npz", "npy", "pth", "pkl", "pickle", "joblib", "onnx"),
        *("json", "jsonl", "yaml", "yml", "toml", "csv", "tsv", "txt", "log", "parquet", "arrow"),
        *("feather", "png", "jpg", "jpeg", "gif", "svg", "pdf", "tar", "gz", "tgz", "zip", "xz"),
        *("zst", "pb", "tflite", "gguf", "ggml", "msgpack", "lock", "tmp", "bak", "ipynb"),
        *("html", "npmignore", "engine", "keras", "mlmodel", "ot", "params", "index"),
    }
)
# Top-level domains that are file endings too (.pt: Portugal and torch.save): a file when the
# label before it holds a digit (step100.pt), as checkpoint names do and host names seldom do.
_AMBIGUOUS_ENDINGS: Final = frozenset({"pt", "py", "sh", "md", "rs", "pl", "so", "mp", "ps"})


def _is_file_name(host: str, tld: str) -> bool:
    """Return True when user@host.tld reads as a file name, not an e-mail domain."""
    ending = tld.lower()
    if ending in _FILE_ENDINGS:
        return True
    label = host.rpartition(".")[2]
    return ending in _AMBIGUOUS_ENDINGS and any(c.isdigit() for c in label)


def _replace_at(match: re.Match[str]) -> str:
    if match.lastgroup == "url":
        return f"{match['url_user']}{REDACTED}@"
    if match["email_user"] == "git":  # git@github.com:org/repo is an address, not a person
        return match.group()
    if _is_file_name(match["email_host"], match["email_tld"]):
        return match.group()
    return REDACTED


class _Walk:
    """One deep redaction: tracks the containers on the current path to survive cycles."""

    __slots__ = ("_active", "_break_cycles", "_redactor", "saw_cycle")

    def __init__(self, redactor: Redactor, *, break_cycles: bool) -> None:
        self._redactor = redactor
        self._break_cycles = break_cycles
        self._active: set[int] = set()
        self.saw_cycle = False

    def value(self, value: object, depth: int) -> object:
        """Return *value* redacted; *depth* is the number of containers around it."""
        if type(value) in _ATOMS:
            return value
        try:
            if isinstance(value, str):
                return self._redactor.redact_text(value)
            if type(value) not in _PLAIN_CONTAINERS and not _is_container(value):
                return value
        except Exception:  # a dead weakref.proxy: nothing to read, so nothing to hide
            return value
        if depth >= _MAX_DEPTH:
            return REDACTED
        if id(value) in self._active:
            self.saw_cycle = True
            return _CYCLE if self._break_cycles else value
        self._active.add(id(value))
        try:
            return self._container(value, depth + 1)
        except Exception:  # a container that breaks while walked: what it holds is unknown
            return REDACTED
        finally:
            self._active.discard(id(value))

    def _container(self, value: object, depth: int) -> object:
        if isinstance(value, (dict, Mapping)):  # dict first: a cheap check for the usual case
            return self._mapping(value, depth)
        if isinstance(value, (list, tuple, set, frozenset)):
            items = [self.value(item, depth) for item in value]
            if all(new is old for new, old in zip(items, value, strict=True)):
                return value
            return _rebuild(value, items)
        dataclasses = _dataclasses_for(value)
        if dataclasses is not None:
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            redacted = self._mapping(fields, depth)
            return value if redacted is fields else redacted
        return value

    def _mapping(self, mapping: Mapping[Any, object], depth: int) -> object:
        out: dict[object, object] | None = None
        for key, item in mapping.items():
            name = key if isinstance(key, str) else str(key)
            new = REDACTED if self._redactor.is_secret_key(name) else self.value(item, depth)
            if new is not item and out is None:
                out = dict(mapping)
            if out is not None:
                out[key] = new
        return mapping if out is None else out


def _is_container(value: object) -> bool:
    return isinstance(value, (Mapping, list, tuple, set, frozenset)) or (
        _dataclasses_for(value) is not None
    )


def _dataclasses_for(value: object) -> Any:
    """Return the dataclasses module when *value* is a dataclass instance, else None.

    The module (~8 ms to import) is looked up, not imported: no dataclass exists before it is
    loaded.
    """
    dataclasses = sys.modules.get("dataclasses")
    if dataclasses is not None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses
    return None


def _rebuild(original: object, items: list[object]) -> object:
    """Return *items* in the container type the encoder treats *original* as."""
    if type(original) is tuple:
        return tuple(items)
    if isinstance(original, frozenset):
        return frozenset(items)
    if isinstance(original, set):
        return set(items)
    return items


DEFAULT_REDACTOR: Final = Redactor()
"""The redactor runs use unless given ``redact=``."""


def is_secret_key(key: str) -> bool:
    """Return True when *key* names a secret, by the default rules."""
    return DEFAULT_REDACTOR.is_secret_key(key)


def redact_text(text: str) -> str:
    """Return *text* with credentials and e-mail addresses replaced, by the default rules."""
    return DEFAULT_REDACTOR.redact_text(text)


def redact(value: object) -> object:
    """Return *value* with secrets redacted at any depth, by the default rules."""
    return DEFAULT_REDACTOR.redact(value)


def redact_fields(fields: dict[str, object]) -> dict[str, object]:
    """Return a record's fields redacted, by the default rules."""
    return DEFAULT_REDACTOR.redact_fields(fields)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Return a copy of a command line with secrets hidden, by the default rules."""
    return DEFAULT_REDACTOR.redact_argv(argv)
