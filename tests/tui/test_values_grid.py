"""The values grid draws any view the values screen hands it, empty ones included."""

from __future__ import annotations

import numpy as np
import pytest
from textual.app import App, ComposeResult

from tvis_tui.widgets.values_grid import ValuesGrid


class GridApp(App):
    def compose(self) -> ComposeResult:
        yield ValuesGrid(id="grid")


@pytest.mark.parametrize("view, shape", [
    (np.zeros((0, 8)), (0, 8)), (np.zeros((0,)), (0, 1)), (np.zeros((5, 0)), (5, 0)),
    (np.arange(3), (3, 1)), (np.float32(2.5), (1, 1)),
])
async def test_views_of_any_shape_are_drawn(view, shape):
    async with GridApp().run_test(size=(60, 12)) as pilot:
        grid = pilot.app.query_one(ValuesGrid)
        grid.show(np.asarray(view))
        await pilot.pause()
        assert grid.matrix.shape == shape
