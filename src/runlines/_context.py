"""What a run records about its process: identity, host, versions, git state, distributed rank.

Imported when the first run opens (see `run._load`).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple

from runlines import _layout, _watching
from runlines import fields as _f
from runlines._version import __version__
from runlines.errors import FieldError

_NAME_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
# `<name>.rank<R>.jsonl` is a rank's log, `<name>.notes.jsonl` a run's tags and notes (_layout)
_RESERVED_SUFFIX_RE: Final = re.compile(r"\.(rank\d+|notes)$")


class Distributed(NamedTuple):
    """The process's place in a distributed job, from the launcher's environment."""

    rank: int
    world_size: int


def check_run_name(name: object) -> str:
    """Return *name* if it can name a log file, else raise with the rule."""
    if not isinstance(name, str):
        msg = f"a run name must be a str, got {type(name).__name__} {name!r}"
        raise TypeError(msg)
    if not _NAME_RE.fullmatch(name) or _RESERVED_SUFFIX_RE.search(name):
        msg = (
            f"run name {name!r} cannot name a log file; use letters, digits, '.', '_' and '-', "
            "not starting with '.' and not ending in '.rank<N>' or '.notes' "
            "(e.g. 'baseline-lr3e-4')"
        )
        raise FieldError(msg)
    return name


def distributed_from_env(environ: Mapping[str, str] | None = None) -> Distributed | None:
    """Return the rank and world size that torchrun (or a launcher like it) set, if above one."""
    env = os.environ if environ is None else environ
    try:
        world_size = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", "0"))
    except ValueError:
        return None
    return Distributed(rank, world_size) if world_size > 1 else None


def run_folder(directory: str | os.PathLike[str]) -> Path:
    """Return the folder a run writes in, `Run(directory=...)`, as a Path."""
    return Path(directory)


def log_path(directory: Path, name: str, dist: Distributed | None) -> Path:
    """Return this process's log file: <name>.jsonl, or <name>.rank<R>.jsonl for rank R > 0."""
    return _layout.log_path(directory, name, None if dist is None else dist.rank)


def new_run_id() -> str:
    """Return an identifier unique to this process's run, sortable by start time."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}"


def describe_process(diff_dir: Path | None = None) -> dict[str, Any]:
    """Return host, pid, versions, argv, cwd, the environment and the git state of the cwd.

    A dirty tree's diff is saved under *diff_dir* (created when needed): `git_diff` holds its
    path relative to the parent of *diff_dir*, `git_diff_sha256` its hash.
    """
    cwd = os.getcwd()
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "python": platform.python_version(),
        "runlines": __version__,
        "argv": list(sys.argv),
        "cwd": cwd,
    }
    nvml = _watching.start_nvml(_GPU_WAIT_S)  # on a thread, while git runs
    state = git_state(cwd)
    info.update(describe_environment(nvml=nvml))
    diff = state.pop(_DIFF, None)
    if isinstance(diff, bytes) and diff_dir is not None:
        state.update(save_diff(diff, diff_dir))
    info.update(state)
    return info


# -- the environment ------------------------------------------------------------------------

# Packages that matter to training, by import name -> the name a user knows. Only those the
# program has imported already are recorded: importing one here would cost the run's open.
_PACKAGES: Final = {
    "torch": "torch",
    "numpy": "numpy",
    "transformers": "transformers",
    "lightning": "lightning",
    "pytorch_lightning": "pytorch_lightning",
    "accelerate": "accelerate",
    "datasets": "datasets",
    "tokenizers": "tokenizers",
    "safetensors": "safetensors",
    "peft": "peft",
    "trl": "trl",
    "deepspeed": "deepspeed",
    "triton": "triton",
    "flash_attn": "flash_attn",
    "xformers": "xformers",
    "bitsandbytes": "bitsandbytes",
    "torchvision": "torchvision",
    "timm": "timm",
    "diffusers": "diffusers",
    "vllm": "vllm",
    "jax": "jax",
    "flax": "flax",
    "optax": "optax",
    "tensorflow": "tensorflow",
    "keras": "keras",
    "sklearn": "scikit-learn",
    "scipy": "scipy",
    "pandas": "pandas",
}


_GPU_WAIT_S: Final = 1.0  # a run's open waits this long for NVML to start, git included


def describe_environment(
    modules: Mapping[str, Any] | None = None, *, nvml: Callable[[], Any] | None = None
) -> dict[str, Any]:
    """Return the versions of the imported training packages, CUDA and cuDNN, GPUs and driver.

    Each part is isolated: one that fails is left out, and nothing here imports a package.
    """
    loaded = sys.modules if modules is None else modules
    info: dict[str, Any] = {}
    packages = _package_versions(loaded)
    if packages:
        info[_f.PACKAGES] = packages
    torch = loaded.get("torch")
    if torch is not None:
        info.update(_torch_versions(torch))
    nvml = _watching.load_nvml if nvml is None else nvml
    info.update(_watching.describe_gpus(loaded, nvml=nvml))
    return info


def _package_versions(modules: Mapping[str, Any]) -> dict[str, str]:
    versions: dict[str, str] = {}
    for module_name, package in _PACKAGES.items():
        module = modules.get(module_name)
        version = getattr(module, "__version__", None) if module is not None else None
        if isinstance(version, str):
            versions[package] = str.__str__(version)  # a plain str: torch's is a subclass
        elif version is not None:
            versions[package] = str(version)
    return versions


def _torch_versions(torch: Any) -> dict[str, Any]:
    """CUDA as torch was built with it, and cuDNN's version when torch can tell without work."""
    info: dict[str, Any] = {}
    try:
        cuda = torch.version.cuda
        if cuda:
            info[_f.CUDA] = str(cuda)
    except Exception:  # a part that fails is left out
        pass
    try:
        if torch.cuda.is_initialized():  # cudnn.version() would load the library otherwise
            cudnn = torch.backends.cudnn.version()
            if cudnn:
                info[_f.CUDNN] = int(cudnn)
    except Exception:  # a part that fails is left out
        pass
    return info


# -- git ------------------------------------------------------------------------------------

GIT_TIMEOUT_S: Final = 0.5
"""How long a run's open waits for git, in all: past it, what git had not said is left out."""
GIT_DIFF_MAX_BYTES: Final = 8 * 1024 * 1024
"""A larger diff of a dirty tree is not saved; `git_note` says so."""
_DIFF: Final = "_diff"  # git_state()'s key for the diff bytes, which describe_process saves


def git_state(cwd: str, timeout_s: float = GIT_TIMEOUT_S) -> dict[str, Any]:
    """Return the commit, dirty flag and diff (bytes, key "_diff") of the repository at *cwd*.

    `git rev-parse` and `git diff HEAD` run side by side, and both together get *timeout_s*:
    past it the dirty flag and the diff (or the commit too) are left out and `git_note` says
    which.
    """
    commit = _start_git(cwd, "rev-parse", "--verify", "-q", "HEAD")
    if commit is None:
        return {}  # no git on this machine
    diff = _start_git(
        cwd, "diff", "HEAD", "--binary", "--no-color", "--no-ext-diff", "--no-textconv"
    )
    deadline = time.monotonic() + timeout_s
    state: dict[str, Any] = {}
    try:
        head = _finish(commit, deadline)
        if head is None:
            return {}  # not a repository, or no commit yet
        state[_f.GIT_COMMIT] = head.decode("ascii", "replace").strip()
        patch = None if diff is None else _finish(diff, deadline)
        if patch is not None:
            state[_f.GIT_DIRTY] = bool(patch)
            if patch:
                state[_DIFF] = patch
    except subprocess.TimeoutExpired:
        what = "the dirty flag and the diff" if state else "the commit and the dirty flag"
        state[_f.GIT_NOTE] = f"git did not answer within {timeout_s} s: {what} not recorded"
    finally:
        for process in (commit, diff):
            if process is not None:
                _end_git(process)
    return state


def _start_git(cwd: str, *args: str) -> Any:
    try:
        return subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, ValueError):
        return None  # no git: the run is still worth logging


def _end_git(process: Any) -> None:
    if process.poll() is None:
        process.kill()  # a slow git must not outlive the bound
    if process.stdout is not None:
        process.stdout.close()
    process.wait()


def _finish(process: Any, deadline: float) -> bytes | None:
    """Wait for *process* until *deadline*; return its output, or None when it failed."""
    out, _ = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
    return out if process.returncode == 0 and isinstance(out, bytes) else None


def save_diff(diff: bytes, diff_dir: Path) -> dict[str, Any]:
    """Write *diff* as `git-<sha256 prefix>.diff` under *diff_dir*; return the fields naming it."""
    if len(diff) > GIT_DIFF_MAX_BYTES:
        return {
            _f.GIT_NOTE: f"the diff of the dirty tree is {len(diff)} bytes, over "
            f"{GIT_DIFF_MAX_BYTES}: not saved"
        }
    digest = hashlib.sha256(diff).hexdigest()
    path = diff_dir / f"git-{digest[:16]}.diff"
    try:
        diff_dir.mkdir(parents=True, exist_ok=True)
        if not path.exists():  # the same diff as an earlier attempt: one file
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(diff)
            os.replace(tmp, path)
    except OSError as err:
        return {_f.GIT_NOTE: f"the diff of the dirty tree could not be saved ({err})"}
    return {
        _f.GIT_DIFF: f"{diff_dir.name}/{path.name}",
        _f.GIT_DIFF_SHA256: digest,
    }
