"""Artifacts: side files saved atomically, never overwritten, and records that point at them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from _optional import skip_without
from runlines import artifacts
from runlines.artifacts import hash_path, save_artifact
from runlines.errors import FieldError


@pytest.fixture(name="log_dir")
def _log_dir(tmp_path: Path) -> Path:
    log_dir = tmp_path / "runs"
    log_dir.mkdir()
    return log_dir


@pytest.fixture(name="art_dir")
def _art_dir(log_dir: Path) -> Path:
    return log_dir / "demo.artifacts"


@pytest.fixture(name="umask_022")
def _umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save(
    log_dir: Path, art_dir: Path, obj: object, name: str = "preds", **kwargs: object
) -> tuple[Path, dict[str, object]]:
    return save_artifact(log_dir, art_dir, name, obj, **kwargs)  # type: ignore[arg-type]


class TestSavedObjects:
    def test_numpy_array_round_trips_through_np_load(self, log_dir: Path, art_dir: Path) -> None:
        array = np.arange(12, dtype=np.float32).reshape(3, 4)

        path, record = save(log_dir, art_dir, array)

        np.testing.assert_array_equal(np.load(path), array)
        assert path == art_dir / "preds.npy"
        assert record == {
            "name": "preds",
            "path": "demo.artifacts/preds.npy",
            "bytes": path.stat().st_size,
            "sha256": sha256_of(path),
            "format": "npy",
            "shape": [3, 4],
            "dtype": "float32",
        }

    def test_numpy_scalar_is_a_0d_npy(self, log_dir: Path, art_dir: Path) -> None:
        path, record = save(log_dir, art_dir, np.float64(2.5))

        assert np.load(path) == 2.5
        assert record["shape"] == []

    def test_object_array_is_refused(self, log_dir: Path, art_dir: Path) -> None:
        with pytest.raises(TypeError, match="array of Python objects"):
            save(log_dir, art_dir, np.array([{}, []], dtype=object))

    def test_dataframe_round_trips_through_parquet(self, log_dir: Path, art_dir: Path) -> None:
        frame = pd.DataFrame({"step": [1, 2, 3], "loss": [0.5, 0.4, 0.3], "split": list("abc")})

        path, record = save(log_dir, art_dir, frame)

        pd.testing.assert_frame_equal(pd.read_parquet(path), frame)
        assert (record["format"], record["shape"]) == ("parquet", [3, 3])
        assert record["sha256"] == sha256_of(path)
        assert record["bytes"] == path.stat().st_size

    def test_dataframe_is_csv_without_pyarrow(
        self, log_dir: Path, art_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now fails
        frame = pd.DataFrame({"step": [1, 2], "loss": [0.5, 0.4]})

        path, record = save(log_dir, art_dir, frame)

        pd.testing.assert_frame_equal(pd.read_csv(path, index_col=0), frame)
        assert path.suffix == ".csv"
        assert record["format"] == "csv"
        assert record["sha256"] == sha256_of(path)

    def test_dict_is_strict_json(self, log_dir: Path, art_dir: Path) -> None:
        obj = {"acc": 0.9, "bad": float("nan"), "big": float("inf"), "arr": np.array([1.0, np.nan])}

        path, record = save(log_dir, art_dir, obj)

        text = path.read_text()
        assert json.loads(text, parse_constant=pytest.fail) == {
            "acc": 0.9,
            "bad": None,
            "big": None,
            "arr": [1.0, None],
        }
        assert record["format"] == "json"
        assert record["sha256"] == sha256_of(path)

    def test_json_takes_numpy_scalars_strided_arrays_paths_and_sets(
        self, log_dir: Path, art_dir: Path
    ) -> None:
        obj = [np.int64(3), np.arange(6).reshape(2, 3)[:, ::2], Path("a/b"), {2, 1}, {1: "x"}]

        path, _ = save(log_dir, art_dir, obj)

        assert json.loads(path.read_text()) == [3, [[0, 2], [3, 5]], "a/b", [1, 2], {"1": "x"}]

    def test_json_refuses_what_it_cannot_encode(self, log_dir: Path, art_dir: Path) -> None:
        with pytest.raises(TypeError, match="cannot write this dict as JSON"):
            save(log_dir, art_dir, {"f": object()})
        assert not art_dir.exists()

    @pytest.mark.parametrize("data", [b"\x00\x01raw", bytearray(b"raw"), memoryview(b"raw")])
    def test_bytes_are_written_as_is(
        self, log_dir: Path, art_dir: Path, data: bytes | bytearray | memoryview
    ) -> None:
        path, record = save(log_dir, art_dir, data)

        assert path.read_bytes() == bytes(data)
        assert (path.suffix, record["format"], record["bytes"]) == (".bin", "bin", len(bytes(data)))

    def test_str_is_utf8_text(self, log_dir: Path, art_dir: Path) -> None:
        path, record = save(log_dir, art_dir, "héllo\n")

        assert path.read_text(encoding="utf-8") == "héllo\n"
        assert (path.suffix, record["format"], record["bytes"]) == (".txt", "txt", 7)

    def test_unsupported_type_lists_what_can_be_saved(self, log_dir: Path, art_dir: Path) -> None:
        class Foo:
            pass

        with pytest.raises(TypeError) as caught:
            save(log_dir, art_dir, Foo())

        assert str(caught.value) == (
            "run.artifact() cannot save a 'TestSavedObjects.test_unsupported_type_lists_what_"
            "can_be_saved.<locals>.Foo'; it saves numpy arrays, torch tensors, pandas "
            "DataFrames, dict, list, bytes and str, or registers an existing file or folder "
            "with path=..."
        )
        assert not art_dir.exists()

    def test_step_goes_in_the_file_name_and_the_record(self, log_dir: Path, art_dir: Path) -> None:
        path, record = save(log_dir, art_dir, [1, 2], step=1200)

        assert path.name == "preds-step1200.json"
        assert record["step"] == 1200
        assert list(record)[-1] == "step"

    def test_artifacts_folder_is_made_on_first_save(self, tmp_path: Path) -> None:
        art_dir = tmp_path / "new" / "demo.artifacts"

        path, record = save(tmp_path / "new", art_dir, "x")

        assert path.parent == art_dir
        assert record["path"] == "demo.artifacts/preds.txt"

    def test_record_path_resolves_from_the_log_folder(self, log_dir: Path, art_dir: Path) -> None:
        path, record = save(log_dir, art_dir, [1])

        assert (log_dir / str(record["path"])).resolve() == path.resolve()

    def test_files_get_the_umask_mode(self, log_dir: Path, art_dir: Path, umask_022: None) -> None:
        path, _ = save(log_dir, art_dir, "x")

        assert path.stat().st_mode & 0o777 == 0o644


class TestTorch:
    def test_tensor_round_trips_as_npy(self, log_dir: Path, art_dir: Path) -> None:
        torch = pytest.importorskip("torch")
        tensor = torch.arange(6, dtype=torch.float32, requires_grad=True).reshape(2, 3)

        path, record = save(log_dir, art_dir, tensor)

        np.testing.assert_array_equal(np.load(path), tensor.detach().numpy())
        assert (record["format"], record["shape"], record["dtype"]) == ("npy", [2, 3], "float32")
        assert "stored_dtype" not in record

    def test_bfloat16_is_stored_as_float32_and_says_so(self, log_dir: Path, art_dir: Path) -> None:
        torch = pytest.importorskip("torch")

        path, record = save(log_dir, art_dir, torch.full((2,), 1.5, dtype=torch.bfloat16))

        assert np.load(path).dtype == np.float32
        assert (record["dtype"], record["stored_dtype"]) == ("bfloat16", "float32")

    def test_tensors_inside_json(self, log_dir: Path, art_dir: Path) -> None:
        torch = pytest.importorskip("torch")

        path, _ = save(log_dir, art_dir, {"x": torch.tensor([1.0, float("nan")])})

        assert json.loads(path.read_text()) == {"x": [1.0, None]}


class TestRegisteredFiles:
    def test_path_registers_a_file_without_copying(self, log_dir: Path, art_dir: Path) -> None:
        ckpt = log_dir / "ckpt" / "model.pt"
        ckpt.parent.mkdir()
        ckpt.write_bytes(b"weights" * 1000)

        path, record = save_artifact(log_dir, art_dir, "model", path=ckpt, step=5)

        assert path == ckpt
        assert not art_dir.exists()
        assert record == {
            "name": "model",
            "path": "ckpt/model.pt",
            "bytes": 7000,
            "sha256": sha256_of(ckpt),
            "format": "pt",
            "step": 5,
        }

    @pytest.mark.parametrize(
        ("file_name", "fmt"),
        [
            ("m.safetensors", "safetensors"),
            ("m.CKPT", "ckpt"),
            ("m.bin", "bin"),
            ("weights", "file"),
        ],
    )
    def test_format_comes_from_the_suffix(
        self, log_dir: Path, art_dir: Path, file_name: str, fmt: str
    ) -> None:
        (log_dir / file_name).write_bytes(b"w")

        _, record = save_artifact(log_dir, art_dir, "model", path=str(log_dir / file_name))

        assert record["format"] == fmt

    def test_file_beside_the_log_folder_gets_a_relative_path(
        self, tmp_path: Path, log_dir: Path, art_dir: Path
    ) -> None:
        ckpt = tmp_path / "ckpts" / "last.pt"
        ckpt.parent.mkdir()
        ckpt.write_bytes(b"w")

        _, record = save_artifact(log_dir, art_dir, "model", path=ckpt)

        assert record["path"] == "../ckpts/last.pt"

    def test_relative_path_is_taken_from_the_working_directory(
        self, log_dir: Path, art_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (log_dir / "model.pt").write_bytes(b"w")
        monkeypatch.chdir(log_dir)

        path, record = save_artifact(log_dir, art_dir, "model", path="model.pt")

        assert path == log_dir / "model.pt"
        assert record["path"] == "model.pt"

    def test_file_sharing_only_the_root_gets_an_absolute_path(self) -> None:
        record_path = artifacts.record_path(Path("/scratch/ckpt/last.pt"), Path("/home/me/runs"))

        assert record_path == "/scratch/ckpt/last.pt"

    def test_missing_file_is_named(self, log_dir: Path, art_dir: Path) -> None:
        with pytest.raises(FileNotFoundError, match=r"path='nope\.pt'\): no such file or folder"):
            save_artifact(log_dir, art_dir, "model", path="nope.pt")

    def test_folder_is_registered_with_total_bytes_and_a_manifest_hash(
        self, log_dir: Path, art_dir: Path
    ) -> None:
        folder = make_checkpoint_folder(log_dir / "hf")

        path, record = save_artifact(log_dir, art_dir, "model", path=folder)

        manifest = "".join(
            f"{sha256_of(folder / rel)}  {rel}\n"
            for rel in sorted(["config.json", "model.safetensors", "tokenizer/vocab.txt"])
        )
        assert path == folder
        assert record == {
            "name": "model",
            "path": "hf",
            "bytes": 2 + 1000 + 3,
            "sha256": hashlib.sha256(manifest.encode()).hexdigest(),
            "format": "dir",
        }

    def test_folder_hash_depends_on_content_and_names_not_location(self, tmp_path: Path) -> None:
        first = make_checkpoint_folder(tmp_path / "a")
        second = make_checkpoint_folder(tmp_path / "b")
        assert hash_path(first) == hash_path(second)

        (second / "config.json").rename(second / "config2.json")
        assert hash_path(first) != hash_path(second)

    def test_folder_follows_symlinked_files(self, tmp_path: Path) -> None:
        plain = make_checkpoint_folder(tmp_path / "plain")
        linked = tmp_path / "linked"
        (linked / "tokenizer").mkdir(parents=True)
        for rel in ("config.json", "model.safetensors", "tokenizer/vocab.txt"):
            (linked / rel).symlink_to(plain / rel)

        assert hash_path(linked) == hash_path(plain)

    def test_hash_path_of_a_file_is_its_sha256(self, tmp_path: Path) -> None:
        file = tmp_path / "big.bin"
        file.write_bytes(os.urandom(3 * (1 << 20) + 17))  # more than one read chunk

        assert hash_path(file) == sha256_of(file)


def make_checkpoint_folder(folder: Path) -> Path:
    (folder / "tokenizer").mkdir(parents=True)
    (folder / "config.json").write_bytes(b"{}")
    (folder / "model.safetensors").write_bytes(b"w" * 1000)
    (folder / "tokenizer" / "vocab.txt").write_bytes(b"a\nb")
    return folder


class TestNames:
    @pytest.mark.parametrize(
        "name", ["../../etc/x", "a/b", "a\\b", ".hidden", ".", "..", "", "a\0b", 3, None]
    )
    def test_name_that_is_not_plain_is_refused(
        self, log_dir: Path, art_dir: Path, name: object
    ) -> None:
        with pytest.raises(
            FieldError, match=r"is not a plain file name.*not starting with '\.'"
        ) as caught:
            save_artifact(log_dir, art_dir, name, [1])  # type: ignore[arg-type]

        assert repr(name) in str(caught.value)
        assert list(log_dir.parent.rglob("*")) == [log_dir]

    @pytest.mark.parametrize("step", [-1, True, 1.5, "3"])
    def test_bad_step_is_refused(self, log_dir: Path, art_dir: Path, step: object) -> None:
        with pytest.raises(FieldError, match="step must be a non-negative int"):
            save_artifact(log_dir, art_dir, "preds", [1], step=step)  # type: ignore[arg-type]

    def test_neither_object_nor_path_is_refused(self, log_dir: Path, art_dir: Path) -> None:
        with pytest.raises(FieldError, match=r"exactly one of an object to save or path=.*neither"):
            save_artifact(log_dir, art_dir, "preds")

    def test_both_object_and_path_is_refused(self, log_dir: Path, art_dir: Path) -> None:
        with pytest.raises(FieldError, match="got both"):
            save_artifact(log_dir, art_dir, "preds", [1], path="model.pt")


class TestNoOverwrite:
    def test_same_name_gets_a_counter(self, log_dir: Path, art_dir: Path) -> None:
        paths = [save(log_dir, art_dir, f"v{i}")[0] for i in range(3)]

        assert [p.name for p in paths] == ["preds.txt", "preds-2.txt", "preds-3.txt"]
        assert [p.read_text() for p in paths] == ["v0", "v1", "v2"]

    def test_same_step_gets_a_counter_after_the_step(self, log_dir: Path, art_dir: Path) -> None:
        paths = [save(log_dir, art_dir, "x", step=7)[0] for _ in range(2)]

        assert [p.name for p in paths] == ["preds-step7.txt", "preds-step7-2.txt"]

    def test_without_hard_links_still_never_overwrites(
        self, log_dir: Path, art_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def no_links(src: object, dst: object) -> None:
            msg = "hard links not supported"
            raise PermissionError(msg)

        monkeypatch.setattr(os, "link", no_links)

        paths = [save(log_dir, art_dir, f"v{i}")[0] for i in range(2)]

        assert [(p.name, p.read_text()) for p in paths] == [
            ("preds.txt", "v0"),
            ("preds-2.txt", "v1"),
        ]
        assert sorted(p.name for p in art_dir.iterdir()) == ["preds-2.txt", "preds.txt"]

    def test_no_temporary_file_is_left_after_a_save(self, log_dir: Path, art_dir: Path) -> None:
        save(log_dir, art_dir, np.zeros(3))

        assert [p.name for p in art_dir.iterdir()] == ["preds.npy"]


class TestAtomic:
    def test_failure_mid_write_leaves_neither_the_file_nor_a_temporary(
        self, log_dir: Path, art_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        real_write = artifacts._HashingWriter.write

        def write_then_fail(self: artifacts._HashingWriter, data: bytes) -> int:
            if self.bytes:
                raise OSError(28, "No space left on device")
            return real_write(self, data)

        monkeypatch.setattr(artifacts._HashingWriter, "write", write_then_fail)

        with pytest.raises(OSError, match="No space left"):
            save(log_dir, art_dir, np.zeros((1000, 100)))

        assert list(art_dir.iterdir()) == []

    def test_failure_at_fsync_leaves_nothing(
        self, log_dir: Path, art_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def fail(fd: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "fsync", fail)

        with pytest.raises(OSError, match="Input/output error"):
            save(log_dir, art_dir, {"a": 1})

        assert list(art_dir.iterdir()) == []

    def test_a_failed_save_keeps_the_earlier_file(
        self, log_dir: Path, art_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        first, _ = save(log_dir, art_dir, "v1")

        def fail(fd: int) -> None:
            msg = "boom"
            raise OSError(msg)

        monkeypatch.setattr(os, "fsync", fail)

        with pytest.raises(OSError, match="boom"):
            save(log_dir, art_dir, "v2")

        assert [p.name for p in art_dir.iterdir()] == ["preds.txt"]
        assert first.read_text() == "v1"


def test_importing_the_modules_imports_no_heavy_library() -> None:
    code = (
        "import sys, runlines.artifacts, runlines.sampling, runlines.spans;"
        "print([m for m in ('numpy', 'pandas', 'torch', 'pyarrow') if m in sys.modules])"
    )

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "[]"


class TestRelativeRunDirectory:
    def test_a_relative_run_directory_records_paths_from_the_log_folder(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from runlines import Run

        monkeypatch.chdir(tmp_path)
        with Run("r", "out", stdout=False) as run:
            target = run.artifact("preds", np.zeros(3))

        lines = run.path.read_text().splitlines()
        record = next(r for r in map(json.loads, lines) if r["event"] == "artifact")
        assert target.is_absolute()
        assert target == tmp_path / "out" / "r.artifacts" / "preds.npy"
        assert record["path"] == "r.artifacts/preds.npy"
        assert (tmp_path / "out" / record["path"]).is_file()


class TestSteps:
    @pytest.mark.parametrize("kind", ["numpy", "torch"])
    def test_an_integer_numpy_or_torch_step_is_a_step(
        self, log_dir: Path, art_dir: Path, kind: str
    ) -> None:
        if kind == "torch":
            skip_without("torch")
            import torch

        step = np.int64(5) if kind == "numpy" else torch.tensor(5)

        target, record = save_artifact(log_dir, art_dir, "preds", b"x", step=step)

        assert record["step"] == 5
        assert type(record["step"]) is int
        assert target.name == "preds-step5.bin"

    @pytest.mark.parametrize("step", [-1, True, 1.5, "3", np.float64(2.0), np.bool_(True)])
    def test_a_step_that_is_not_a_non_negative_int_is_refused(
        self, log_dir: Path, art_dir: Path, step: object
    ) -> None:
        with pytest.raises(FieldError, match="non-negative int"):
            save_artifact(log_dir, art_dir, "preds", b"x", step=step)  # type: ignore[arg-type]


class TestAmongSampledEvents:
    """An artifact record is written where it was called; it never cuts a sampler's window."""

    def test_aggregation_windows_keep_their_calls_across_artifacts(self, log_dir: Path) -> None:
        from runlines import Run

        with Run("demo", log_dir, stdout=False) as run:
            run.sample("batch", every=7, aggregate=True)
            for step in range(1, 31):
                run.log("batch", step=step)
                if step in (8, 10, 20):
                    run.artifact("ckpt", b"w", step=step)

        logged = [json.loads(line) for line in run.path.read_text().splitlines()]
        windows = [(r["step_min"], r["step_max"], r["n"]) for r in logged if r["event"] == "batch"]
        assert windows == [(1, 7, 7), (8, 14, 7), (15, 21, 7), (22, 28, 7), (29, 30, 2)]
        order = [(r["event"], r.get("step_max", r.get("step"))) for r in logged[1:-1]]
        assert order == [
            ("batch", 7),
            ("artifact", 8),
            ("artifact", 10),
            ("batch", 14),
            ("artifact", 20),
            ("batch", 21),
            ("batch", 28),
            ("batch", 30),
        ]

    def test_kept_calls_stay_one_in_n_across_artifacts(self, log_dir: Path) -> None:
        from runlines import Run

        with Run("demo", log_dir, stdout=False) as run:
            run.sample("eval", every=4)
            for step in range(1, 12):
                run.log("eval", step=step)
                if step == 2:
                    run.artifact("ckpt", b"w", step=step)

        logged = [json.loads(line) for line in run.path.read_text().splitlines()]
        kept = [(r["step"], r["n"]) for r in logged if r["event"] == "eval"]
        assert kept == [(1, 1), (5, 4), (9, 4), (11, 2)]
