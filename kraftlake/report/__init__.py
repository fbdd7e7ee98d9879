"""What happened to a cluster in a window of its history: the incident report, pure (no Spark).

The sections are computed from the history tables' versions (:mod:`kraftlake.report.sections`), whichever
reader fetched them (:mod:`kraftlake.report.from_log` replays a log), and written as one self-contained page,
Markdown or JSON (:mod:`kraftlake.report.render`). Nothing is imported here: ``kraftlake report --help`` loads no
pandas.
"""
