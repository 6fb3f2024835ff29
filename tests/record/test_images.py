"""Images among sample values: which forms are recognised and the pixels drawn for them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tvis_tui.record.images import MAX_PIXELS, image_view


def test_uint8_hwc_is_drawn_as_it_is_and_never_shared():
    arr = np.arange(8 * 8 * 3, dtype=np.uint8).reshape(8, 8, 3)
    view = image_view(arr)
    assert view.layout == "HWC" and (view.lo, view.hi) == (0.0, 255.0)
    np.testing.assert_array_equal(view.pixels, arr)
    view.pixels[0, 0, 0] = 99
    assert arr[0, 0, 0] == 0


def test_floats_in_unit_range_are_scaled_by_255():
    t = torch.tensor([0.0, 0.25, 0.5, 1.0]).repeat(3, 4, 1)  # C x H x W
    view = image_view(t)
    assert view.layout == "CHW" and view.pixels.shape == (4, 4, 3)
    assert view.pixels[0, :, 0].tolist() == [0, 63, 127, 255]


def test_a_normalised_image_is_stretched_over_its_own_range():
    t = torch.tensor([-2.0, 0.0, 2.0, 1.0]).repeat(1, 4, 1)
    view = image_view(t)
    assert (view.lo, view.hi) == (-2.0, 2.0)
    assert view.pixels[0, :, 0].tolist() == [0, 127, 255, 191]


def test_non_finite_values_draw_black_or_white():
    t = torch.tensor([math.nan, -math.inf, math.inf, 0.5]).repeat(3, 4, 1)
    view = image_view(t)
    assert view.pixels[0, :, 0].tolist() == [0, 0, 255, 127]


def test_float64_arrays_past_float32_range_still_scale():
    arr = np.array([-1e300, 0.0, 1e300, 5e299] * 4).reshape(4, 4, 1)
    view = image_view(np.repeat(arr, 3, axis=2))
    assert view.pixels[0, :, 0].tolist() == [0, 127, 255, 191]


def test_big_images_are_subsampled_by_a_whole_stride():
    arr = np.random.default_rng(0).random((1030, 1030, 3), dtype=np.float32)
    view = image_view(arr)
    assert view.stride == 3 and view.pixels.shape == (344, 344, 3)
    assert view.pixels.shape[0] * view.pixels.shape[1] <= MAX_PIXELS
    np.testing.assert_array_equal(view.pixels, (arr[::3, ::3] * 255).astype(np.uint8))


def test_batches_show_their_first_images_side_by_side():
    view = image_view(torch.zeros(10, 1, 5, 6))
    assert view.layout == "NCHW" and view.pixels.shape == (5, 6 * 8, 1)


@pytest.mark.parametrize("value", [torch.zeros(16), torch.zeros(3, 2, 2), np.zeros((5, 5, 7)),
                                   torch.zeros(2, 2, dtype=torch.complex64), "text"])
def test_what_is_not_an_image_gets_no_view(value):
    assert image_view(value) is None


def test_extreme_float32_images_draw_without_numpy_warnings(recwarn):
    huge = np.array([-3e38, 3e38, 0.0, 1e38] * 4, dtype=np.float32).reshape(4, 4, 1)
    tiny = np.array([-1e-40, 1e-40, 0.0, -1e-40] * 4, dtype=np.float32).reshape(4, 4, 1)
    assert image_view(np.repeat(huge, 3, axis=2)).pixels[0, :, 0].tolist() == [0, 255, 127, 169]
    assert image_view(np.repeat(tiny, 3, axis=2)).pixels[0, :, 0].tolist() == [0, 255, 127, 0]
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_pil_images_in_their_usual_modes():
    from PIL import Image

    rgb = np.arange(6 * 5 * 3, dtype=np.uint8).reshape(6, 5, 3)
    view = image_view(Image.fromarray(rgb))
    assert view.layout == "PIL RGB"
    np.testing.assert_array_equal(view.pixels, rgb)
    gray = image_view(Image.fromarray(rgb[:, :, 0]))
    assert gray.layout == "PIL L" and gray.pixels.shape == (6, 5, 1)
    palette = Image.fromarray(rgb).convert("P")
    assert image_view(palette).pixels.shape == (6, 5, 3)  # the palette's colours, not its indices


def test_a_16_bit_pil_image_is_drawn_over_its_own_range_not_clipped():
    from PIL import Image

    depth = (np.arange(4 * 8, dtype=np.uint16).reshape(4, 8) * 100)  # 0 .. 3100
    view = image_view(Image.fromarray(depth))
    assert view.layout.startswith("PIL I") and (view.lo, view.hi) == (0.0, 3100.0)
    assert view.pixels[0, 0, 0] == 0 and view.pixels[-1, -1, 0] == 255
    assert 120 <= view.pixels[2, 0, 0] <= 135  # 1600 of 3100, not white
