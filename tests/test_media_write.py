"""run.image(), images(), histogram(), table(), text() and audio(): side files and records."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import wave
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _optional import needs
from runlines import Run
from runlines.errors import FieldError, RunStateError

QUIET: dict[str, Any] = {"stdout": False, "system": False, "capture": False}
RNG = np.random.default_rng(0)
RGB = RNG.integers(0, 256, (20, 30, 3), dtype=np.uint8)


def records(run: Run, event: str | None = None) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in run.path.read_text().splitlines()]
    return [r for r in found if event is None or r["event"] == event]


def decode_png(data: bytes) -> np.ndarray:
    """Decode a PNG that runlines wrote (8-bit, every row filtered Up) with zlib alone."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    channels = {0: 1, 4: 2, 2: 3, 6: 4}[data[25]]
    idat, at = b"", 8
    while at < len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        if data[at + 4 : at + 8] == b"IDAT":
            idat += data[at + 8 : at + 8 + size]
        at += 12 + size
    rows = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, -1)
    assert (rows[:, 0] == 2).all()
    pixels = np.cumsum(rows[:, 1:], axis=0, dtype=np.uint64) % 256  # undo Up
    return pixels.astype(np.uint8).reshape(height, width, channels)


def saved(path: Path | None) -> Path:
    """The path a media call returned: None only for input a run that is not strict refused."""
    assert path is not None
    return path


def pil_pixels(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image)


@pytest.fixture(name="run")
def _run(run_dir: Path) -> Any:
    # strict: refused input raises, so each test of an error sees it (test_media_refused.py
    # tests the warning a run that is not strict gives instead)
    with Run("media", run_dir, strict_fields=True, **QUIET) as run:
        yield run


# -- images: every accepted input, pixel-exact -------------------------------------------------


class TestImageInputs:
    @pytest.mark.parametrize(
        ("array", "expected"),
        [
            (RGB, RGB),
            (RGB[:, :, 0], RGB[:, :, :1]),
            (RGB[:, :, :1], RGB[:, :, :1]),
            (np.dstack([RGB, RGB[:, :, :1]]), np.dstack([RGB, RGB[:, :, :1]])),
            (RGB[::2, ::3], RGB[::2, ::3]),  # a strided view
        ],
        ids=["hxwx3", "hxw", "hxwx1", "hxwx4", "strided"],
    )
    def test_uint8_arrays_round_trip_exactly(
        self, run: Run, array: np.ndarray, expected: np.ndarray
    ) -> None:
        path = saved(run.image("img", array, step=3))

        assert np.array_equal(decode_png(path.read_bytes()), expected)
        (record,) = records(run, "image")
        height, width, channels = expected.shape
        assert record == {
            "ts": record["ts"],
            "event": "image",
            "run": "media",
            "name": "img",
            "step": 3,
            "path": f"media.artifacts/media/img/3-{record['sha256'][:8]}.png",
            "sha256": record["sha256"],
            "bytes": path.stat().st_size,
            "format": "png",
            "width": width,
            "height": height,
            "channels": channels,
        }
        assert run.directory / record["path"] == path

    @pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
    def test_float_arrays_in_0_1_become_round_v_times_255(self, run: Run, dtype: Any) -> None:
        array = (RGB / 255.0).astype(dtype)

        path = saved(run.image("img", array, step=0))

        expected = np.rint(array.astype(np.float64) * 255).astype(np.uint8)
        assert np.array_equal(decode_png(path.read_bytes()), expected)

    def test_torch_chw_tensors_round_trip(self, run: Run) -> None:
        torch = pytest.importorskip("torch", reason="pip install torch")
        chw = torch.from_numpy(RGB.copy()).permute(2, 0, 1)

        as_bytes = saved(run.image("t", chw, step=1))
        as_floats = saved(run.image("t", chw.float() / 255, step=2))
        gray = saved(run.image("t", torch.from_numpy(RGB[:, :, 0].copy()), step=3))

        assert np.array_equal(decode_png(as_bytes.read_bytes()), RGB)
        assert np.array_equal(decode_png(as_floats.read_bytes()), RGB)
        assert np.array_equal(decode_png(gray.read_bytes()), RGB[:, :, :1])

    @needs("PIL")
    @pytest.mark.parametrize("mode", ["L", "RGB", "RGBA", "P", "1"])
    def test_pil_images_round_trip(self, run: Run, mode: str) -> None:
        from PIL import Image

        image = Image.fromarray(RGB).convert(mode)

        path = saved(run.image("pil", image, step=1))

        shown = image if mode in ("L", "RGB", "RGBA") else image.convert("RGB")
        expected = np.asarray(shown)
        assert np.array_equal(decode_png(path.read_bytes()), expected.reshape(20, 30, -1))

    @needs("matplotlib")
    def test_matplotlib_figures_are_saved_as_they_render(self, run: Run) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=(2, 1), dpi=50)
        axes.plot([0, 1], [1, 0])
        rendered = io.BytesIO()
        figure.savefig(rendered, format="png")

        path = saved(run.image("fig", figure, step=1))
        plt.close(figure)

        assert path.read_bytes() == rendered.getvalue()
        (record,) = records(run, "image")
        assert (record["width"], record["height"], record["channels"]) == (100, 50, 4)

    def test_png_and_jpeg_files_are_kept_byte_for_byte(self, run: Run, tmp_path: Path) -> None:
        png = saved(run.image("src", RGB, step=1))
        jpeg = tmp_path / "photo.jpg"
        jpeg.write_bytes(_tiny_jpeg())

        copied_png = saved(run.image("copy", png, step=1))
        copied_jpeg = saved(run.image("copy", str(jpeg), step=2))

        assert copied_png.read_bytes() == png.read_bytes()
        assert copied_jpeg.read_bytes() == jpeg.read_bytes()
        assert copied_jpeg.suffix == ".jpg"
        by_step = {r["step"]: r for r in records(run, "image") if r["name"] == "copy"}
        assert (by_step[2]["format"], by_step[2]["width"], by_step[2]["height"]) == ("jpeg", 3, 2)

    @needs("PIL")
    def test_jpeg_is_written_when_asked(self, run: Run) -> None:
        smooth = np.repeat(np.linspace(0, 255, 30, dtype=np.uint8)[None, :, None], 20, 0)
        smooth = np.repeat(smooth, 3, 2)

        path = saved(run.image("jpg", smooth, step=1, format="jpeg", caption="a ramp"))

        assert path.suffix == ".jpg"
        assert np.abs(pil_pixels(path).astype(int) - smooth).max() <= 8  # lossy, but close
        (record,) = records(run, "image")
        assert (record["format"], record["caption"]) == ("jpeg", "a ramp")

    def test_images_writes_one_record_per_image_with_its_index(self, run: Run) -> None:
        paths = run.images("grid", [RGB, RGB[:, :, 0]], step=4, captions=["a", None])

        found = records(run, "image")
        assert [r["index"] for r in found] == [0, 1]
        assert [r.get("caption") for r in found] == ["a", None]
        assert np.array_equal(decode_png(paths[1].read_bytes()), RGB[:, :, :1])

    def test_images_takes_a_batch_array(self, run: Run) -> None:
        paths = run.images("batch", np.stack([RGB, RGB[::-1]]), step=1)

        assert np.array_equal(decode_png(paths[1].read_bytes()), RGB[::-1])
        assert [r["index"] for r in records(run, "image")] == [0, 1]

    def test_the_same_image_twice_at_one_step_gets_two_files(self, run: Run) -> None:
        first = saved(run.image("img", RGB, step=1))
        second = saved(run.image("img", RGB, step=1))

        assert first != second
        assert second.name == f"{first.stem}-2.png"

    def test_a_name_with_slashes_makes_sub_folders(self, run: Run) -> None:
        path = saved(run.image("val/samples", RGB, step=1))

        assert path.parent == run.artifacts_dir / "media" / "val" / "samples"


def _tiny_jpeg() -> bytes:
    """A 3x2 baseline JPEG header enough for the size parser (SOI, APP0, SOF0, EOI)."""
    app0 = b"\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0\x00\x11\x08\x00\x02\x00\x03\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


# -- images: every bad input gets its error, and the run goes on -------------------------------


class TestImageErrors:
    @pytest.mark.parametrize(
        ("image", "error", "match"),
        [
            (RGB.astype(np.int32), ValueError, r"got dtype int32"),
            (np.zeros((3, 20, 30), np.uint8), ValueError, r"shape \[3, 20, 30\].*transpose"),
            (np.zeros((2, 2, 2, 3), np.uint8), ValueError, r"got shape \[2, 2, 2, 3\]"),
            (np.zeros((0, 5), np.uint8), ValueError, r"got shape \[0, 5\]"),
            (np.full((2, 2), 1.5), ValueError, r"in \[0, 1\], got values from 1.5 to 1.5"),
            (np.full((2, 2), np.nan), ValueError, r"in \[0, 1\]"),
            ([[0, 1], [1, 0]], TypeError, r"cannot take a list; it takes a numpy array"),
            (b"\x89PNG", TypeError, r"cannot take a bytes"),
        ],
        ids=["int32", "chw-numpy", "4d", "empty", "float-range", "nan", "list", "bytes"],
    )
    def test_bad_images_are_refused_naming_what_came(
        self, run: Run, image: Any, error: type[Exception], match: str
    ) -> None:
        with pytest.raises(error, match=match):
            run.image("bad", image, step=1)

        run.log("after", step=1, loss=0.5)
        assert [r["event"] for r in records(run)] == ["run_start", "after"]
        assert not (run.artifacts_dir / "media").exists()

    def test_torch_hwc_is_refused_with_the_permute_to_use(self, run: Run) -> None:
        torch = pytest.importorskip("torch", reason="pip install torch")

        with pytest.raises(ValueError, match=r"CxHxW.*\[20, 30, 3\].*permute\(2, 0, 1\)"):
            run.image("bad", torch.from_numpy(RGB.copy()), step=1)

    def test_missing_and_non_image_files_are_refused(self, run: Run, tmp_path: Path) -> None:
        text = tmp_path / "notes.txt"
        text.write_text("hello")

        with pytest.raises(FileNotFoundError, match=r"cannot read the image file .*missing.png"):
            run.image("bad", tmp_path / "missing.png", step=1)
        with pytest.raises(ValueError, match=r"notes.txt.*is not a PNG or JPEG image"):
            run.image("bad", text, step=1)

    @needs("PIL")
    def test_jpeg_of_rgba_is_refused(self, run: Run) -> None:
        with pytest.raises(ValueError, match=r"JPEG has no alpha channel.*format='png'"):
            run.image("bad", np.zeros((2, 2, 4), np.uint8), step=1, format="jpeg")

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"name": "", "step": 1}, r"is not a media name"),
            ({"name": "a//b", "step": 1}, r"is not a media name"),
            ({"name": "../up", "step": 1}, r"is not a media name"),
            ({"name": "a\\b", "step": 1}, r"is not a media name"),
            ({"name": "img", "step": -1}, r"run.image\(\) step must be a non-negative int"),
            ({"name": "img", "step": 1.5}, r"step must be a non-negative int"),
            ({"name": "img", "step": None}, r"needs step="),
            ({"name": "img", "step": 1, "caption": 3}, r"caption must be a str"),
            ({"name": "img", "step": 1, "format": "gif"}, r"format must be 'png', 'jpeg'"),
        ],
    )
    def test_bad_names_steps_captions_and_formats_raise_field_error(
        self, run: Run, kwargs: dict[str, Any], match: str
    ) -> None:
        with pytest.raises(FieldError, match=match):
            run.image(image=RGB, **kwargs)

    def test_images_checks_every_image_before_writing_any(self, run: Run) -> None:
        with pytest.raises(ValueError, match=r"run.images\(\) image 1 takes"):
            run.images("grid", [RGB, np.zeros((2, 2), np.int64)], step=1)
        with pytest.raises(FieldError, match=r"2 images but 1 captions"):
            run.images("grid", [RGB, RGB], step=1, captions=["a"])
        with pytest.raises(TypeError, match=r"non-empty list of images"):
            run.images("grid", [], step=1)

        assert records(run, "image") == []
        assert not (run.artifacts_dir / "media").exists()

    def test_media_after_close_is_refused(self, run_dir: Path) -> None:
        run = Run("closed", run_dir, **QUIET)
        run.close()

        with pytest.raises(RunStateError, match="after it closed"):
            run.image("img", RGB, step=1)
        with pytest.raises(RunStateError, match="after it closed"):
            run.histogram("h", [1.0], step=1)


def test_without_pillow_jpeg_says_how_to_install_it(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_pil(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pil)

    with pytest.raises(
        ImportError, match=r"needs Pillow for JPEG: pip install 'runlines\[media\]'"
    ):
        run.image("img", RGB, step=1, format="jpeg")
    path = saved(run.image("img", RGB, step=1))  # PNG needs no Pillow
    assert np.array_equal(decode_png(path.read_bytes()), RGB)


# -- histograms --------------------------------------------------------------------------------


class TestHistogram:
    @pytest.mark.parametrize(
        "values",
        [
            RNG.standard_normal(10_000),
            RNG.standard_normal(10_000).astype(np.float32),
            RNG.integers(-50, 50, 5_000),
            np.full(10, 3.0),
            np.concatenate([np.linspace(0, 1, 65), [1.0, 0.0]]),  # values on the edges
            (RNG.integers(0, 129, 200_000) / 128).astype(np.float32),  # edges, several blocks
            RNG.standard_normal(150_000) * 1e-3 + 1e4,  # a mean far from 0, a small std
        ],
        ids=["float64", "float32", "int", "constant", "edges", "blocks", "offset"],
    )
    @pytest.mark.parametrize("bins", [1, 7, 64, 512])
    def test_bins_equal_numpy_histogram(self, run: Run, values: np.ndarray, bins: int) -> None:
        run.histogram("h", values, step=1, bins=bins)

        (record,) = records(run, "histogram")
        counts, edges = np.histogram(values, bins)
        assert record["counts"] == counts.tolist()
        assert record["edges"] == edges.tolist()
        assert record["count"] == values.size
        assert (record["min"], record["max"]) == (values.min(), values.max())
        assert record["mean"] == pytest.approx(float(np.mean(values, dtype=np.float64)))
        assert record["std"] == pytest.approx(float(np.std(values, dtype=np.float64)), rel=1e-9)

    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    @pytest.mark.parametrize("bins", [1, 3, 64, 333, 512])
    @pytest.mark.parametrize("shift", [0.0, 1e4, -2e3])
    def test_values_an_ulp_either_side_of_every_edge_are_binned_as_numpy_bins_them(
        self, run: Run, dtype: Any, bins: int, shift: float
    ) -> None:
        """The estimate is not numpy's: values at, just under and just over each edge (and
        spread over several blocks) test the edges' side of it."""
        spread = (RNG.standard_normal(70_000) * 2 + shift).astype(dtype)
        edges = np.histogram_bin_edges(spread, bins).astype(dtype)
        around = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf)])
        inside = around[(around >= spread.min()) & (around <= spread.max())]
        values = RNG.permutation(np.concatenate([spread, np.repeat(inside, 40)]))

        run.histogram("h", values, step=1, bins=bins)

        (record,) = records(run, "histogram")
        counts, edges = np.histogram(values, bins)
        assert record["counts"] == counts.tolist()
        assert record["edges"] == edges.tolist()
        assert record["std"] == pytest.approx(float(np.std(values, dtype=np.float64)), rel=1e-9)

    def test_nan_and_infinities_are_counted_apart_never_binned(self, run: Run) -> None:
        values = np.array([np.nan, 1.0, np.inf, 2.0, -np.inf, np.inf, 3.0, np.nan, np.nan])

        run.histogram("h", values, step=2, bins=4)

        (record,) = records(run, "histogram")
        counts, edges = np.histogram([1.0, 2.0, 3.0], 4)
        assert record["counts"] == counts.tolist()
        assert record["edges"] == edges.tolist()
        assert (record["nan"], record["posinf"], record["neginf"]) == (3, 2, 1)
        assert (record["count"], record["min"], record["max"]) == (3, 1.0, 3.0)
        assert "_nonfinite" not in record

    def test_no_finite_value_gives_empty_bins_and_no_stats(self, run: Run) -> None:
        run.histogram("h", [np.nan, np.inf], step=1, bins=3)

        (record,) = records(run, "histogram")
        assert record["counts"] == [0, 0, 0]
        assert record["edges"] is None
        assert (record["count"], record["mean"], record["nan"], record["posinf"]) == (0, None, 1, 1)

    def test_torch_and_lists_are_binned_like_numpy(self, run: Run) -> None:
        torch = pytest.importorskip("torch", reason="pip install torch")
        values = torch.randn(1000, generator=torch.Generator().manual_seed(0))

        run.histogram("t", values, step=1)
        run.histogram("t", values.to(torch.bfloat16), step=2)
        run.histogram("l", [1, 2, 2, 3], step=1, bins=3)

        found = records(run, "histogram")
        assert found[0]["counts"] == np.histogram(values.numpy(), 64)[0].tolist()
        assert found[1]["count"] == 1000
        assert found[2]["counts"] == [1, 2, 1]

    def test_precomputed_counts_and_edges_are_kept(self, run: Run) -> None:
        run.histogram("pre", (np.array([1, 0, 5]), np.array([0.0, 0.5, 1.0, 2.0])), step=1)

        (record,) = records(run, "histogram")
        assert record["counts"] == [1, 0, 5]
        assert record["edges"] == [0.0, 0.5, 1.0, 2.0]
        assert (record["count"], record["mean"], record["min"]) == (6, None, None)

    @pytest.mark.parametrize(
        ("values", "kwargs", "error", "match"),
        [
            ([1.0], {"bins": 0}, FieldError, r"bins must be an int from 1 to 512"),
            ([1.0], {"bins": 513}, FieldError, r"bins must be an int from 1 to 512"),
            ([1.0], {"bins": 2.5}, FieldError, r"got 2.5"),
            (["a", "b"], {}, TypeError, r"takes numbers .* dtype <U1"),
            ([{}, 1], {}, TypeError, r"takes numbers"),
            (([1, -1], [0, 1, 2]), {}, ValueError, r"counts must be finite and not negative"),
            (([1, 1], [0, 2, 1]), {}, ValueError, r"edges must be finite and increasing"),
            (([1] * 513, list(range(514))), {}, FieldError, r"513 bins; at most 512"),
        ],
        ids=["bins0", "bins513", "bins-float", "strings", "objects", "neg", "edges", "many"],
    )
    def test_bad_histograms_are_refused(
        self,
        run: Run,
        values: Any,
        kwargs: dict[str, Any],
        error: type[Exception],
        match: str,
    ) -> None:
        with pytest.raises(error, match=match):
            run.histogram("h", values, step=1, **kwargs)

        assert records(run, "histogram") == []


# -- tables, text, audio -----------------------------------------------------------------------


class TestTable:
    def test_rows_and_frames_are_written_as_parquet(self, run: Run) -> None:
        pd = pytest.importorskip("pandas", reason="pip install 'runlines[pandas]'")
        rows = [{"prompt": "a", "score": 0.5}, {"prompt": "b", "score": 0.25}]

        from_rows = saved(run.table("samples", rows, step=1))
        from_frame = saved(run.table("samples", pd.DataFrame(rows, index=[7, 8]), step=2))

        assert pd.read_parquet(from_rows).to_dict("records") == rows
        assert pd.read_parquet(from_frame).to_dict("records") == rows
        found = records(run, "table")
        assert [(r["columns"], r["rows"], r["format"]) for r in found] == [
            (["prompt", "score"], 2, "parquet")
        ] * 2

    def test_a_table_of_another_type_is_refused(self, run: Run) -> None:
        with pytest.raises(TypeError, match=r"takes a pandas DataFrame, a list of dicts"):
            run.table("samples", "a,b\n1,2", step=1)
        with pytest.raises(TypeError, match=r"cannot write this list as Parquet"):
            run.table("samples", [{"a": 1}, {"a": "x"}], step=1)


class TestText:
    def test_short_text_is_inline(self, run: Run) -> None:
        assert run.text("sample", "The cat sat.\n", step=5) is None

        (record,) = records(run, "text")
        assert (record["text"], record["chars"], record["step"]) == ("The cat sat.\n", 13, 5)
        assert "path" not in record

    def test_text_over_the_inline_limit_goes_to_a_side_file(self, run: Run) -> None:
        long = "é" * 100_001

        path = run.text("sample", long, step=1)

        assert path is not None
        assert path.read_text(encoding="utf-8") == long
        (record,) = records(run, "text")
        assert "text" not in record
        assert (record["chars"], record["format"], record["bytes"]) == (100_001, "txt", 200_002)

    def test_text_that_is_no_str_is_refused(self, run: Run) -> None:
        with pytest.raises(TypeError, match=r"takes a str, got a bytes"):
            run.text("sample", b"bytes", step=1)  # type: ignore[arg-type]


class TestAudio:
    def test_float_mono_becomes_16_bit_pcm(self, run: Run) -> None:
        samples = np.sin(np.linspace(0, 20, 800))

        path = saved(run.audio("tone", samples, 8000, step=1))

        with wave.open(str(path)) as wav:
            assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 8000)
            read = np.frombuffer(wav.readframes(800), "<i2")
        assert np.array_equal(read, np.rint(samples * 32767).astype(np.int16))
        (record,) = records(run, "audio")
        assert (record["sample_rate"], record["channels"], record["frames"]) == (8000, 1, 800)

    def test_int16_stereo_is_written_as_is(self, run: Run) -> None:
        samples = RNG.integers(-32768, 32767, (100, 2), dtype=np.int16)

        path = saved(run.audio("stereo", samples, 16000, step=1))

        with wave.open(str(path)) as wav:
            assert wav.getnchannels() == 2
            read = np.frombuffer(wav.readframes(100), "<i2").reshape(100, 2)
        assert np.array_equal(read, samples)

    def test_torch_audio_is_channels_by_frames(self, run: Run) -> None:
        torch = pytest.importorskip("torch", reason="pip install torch")

        run.audio("stereo", torch.zeros(2, 300), 16000, step=1)

        (record,) = records(run, "audio")
        assert (record["channels"], record["frames"]) == (2, 300)

    @pytest.mark.parametrize(
        ("samples", "rate", "error", "match"),
        [
            (np.zeros(10), 0, FieldError, r"sample_rate must be a positive int"),
            (np.zeros(10), 44.1, FieldError, r"sample_rate must be a positive int"),
            (np.array([0.0, np.nan]), 8000, ValueError, r"NaN or infinities"),
            (np.zeros((2, 48000)), 8000, ValueError, r"got shape \[2, 48000\]; transpose"),
            (np.zeros((2, 2, 2)), 8000, ValueError, r"got shape \[2, 2, 2\]"),
            (np.zeros(4, np.int64), 8000, ValueError, r"uint8, int16 or int32, got int64"),
            ([0.0, 0.1], 8000, TypeError, r"takes a numpy array or a torch tensor, got a list"),
        ],
        ids=["rate0", "rate-float", "nan", "channels-first", "3d", "int64", "list"],
    )
    def test_bad_audio_is_refused(
        self, run: Run, samples: Any, rate: Any, error: type[Exception], match: str
    ) -> None:
        with pytest.raises(error, match=match):
            run.audio("bad", samples, rate, step=1)

        assert records(run, "audio") == []


def test_a_run_imports_numpy_only_with_its_first_media_call(tmp_path: Path) -> None:
    """The media module (numpy at its top) is the door: a run that logs no media needs neither."""
    code = (
        "import sys, runlines\n"
        f"with runlines.Run('a', {str(tmp_path)!r}, stdout=False, system=False) as run:\n"
        "    run.log('step', loss=0.5)\n"
        "    before = {'numpy', 'runlines._media'} & set(sys.modules)\n"
        "    run.text('note', 'hello', step=1)\n"
        "    print(sorted(before), sorted({'numpy', 'runlines._media'} & set(sys.modules)))\n"
    )

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.split("\n")[0] == "[] ['numpy', 'runlines._media']"
