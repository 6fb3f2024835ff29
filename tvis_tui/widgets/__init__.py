"""Widgets the screens compose; each talks to its screen by messages and reactives.

call_tree.py (rows in call_rows.py), source_pane.py (colours in highlight.py), inspector.py,
status_line.py, values_grid.py, row_table.py (tables cut at whole columns),
sparkline.py (histograms), sample_pane.py (one recorded sample; its images through picture.py,
which picks how this terminal draws them), format.py (numbers, shapes, durations)
"""
