"""What happened to a cluster in a window of its history: the incident report, pure (no Spark).

The sections are computed from the history tables' versions (:mod:`kraftlake.report.sections`), whichever
reader fetched them, and written as one self-contained page, Markdown or JSON (:mod:`kraftlake.report.render`).
"""

from kraftlake.report.model import Report, ReportInput, Section, Window
from kraftlake.report.sections import build_report

__all__ = ["Report", "ReportInput", "Section", "Window", "build_report"]
