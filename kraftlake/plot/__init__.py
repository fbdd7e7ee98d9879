"""Pictures of the metadata history (``kraftlake plot``): figures from plain pandas frames, no Spark here.

The data behind each figure is computed from the warehouse by ``pipelines.plots`` (Spark SQL over the history
tables); this package turns those frames into Vega-Lite charts with altair and writes them
(:mod:`kraftlake.plot.figures`, :mod:`kraftlake.plot.time_axis`, :mod:`kraftlake.plot.output`), and parses what a request names
(:mod:`kraftlake.plot.options`), so a command refuses bad arguments before any JVM starts. It never imports
pyspark: the figure builders are tested on frames written by hand.
"""

from __future__ import annotations

from kraftlake.plot.options import KINDS, Bound, PlotError, PlotRequest, parse_bound, parse_resource

__all__ = ["KINDS", "Bound", "PlotError", "PlotRequest", "parse_bound", "parse_resource"]
