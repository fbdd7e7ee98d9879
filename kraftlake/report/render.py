"""A report written out: one self-contained HTML page (styles, pictures with Vega inline, tables, the SQL of
each section; opens with no network), Markdown for a ticket, or JSON for a pipeline."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from concurrent.futures import Executor
from typing import Any

from kraftlake.plot.time_axis import utc_text
from kraftlake.report.column_rows import ROW_SEPARATOR, ColumnRows, json_line_pieces
from kraftlake.report.model import Report, ReportInput, Section, duration_text

FORMATS = ("html", "md", "json")
#: Rows of a section's table written into the page or the Markdown; the JSON holds them all.
MAX_TABLE_ROWS = 500


def _cell(column: str, value: Any) -> str:
    """A cell as text: times in UTC, durations in an operator's units, lists as ``[1, 2]``."""
    if value is None:
        return ""
    if column.endswith("_ms") and column != "duration_ms":
        return utc_text(value)
    if column == "duration_ms":
        return duration_text(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, bool):
        return "yes" if value else ""
    return str(value)


def _heading(column: str) -> str:
    return {
        "from_time_ms": "from",
        "to_time_ms": "to",
        "time_ms": "time",
        "duration_ms": "duration",
        "expires_ms": "expires",
    }.get(column, column.replace("_", " "))


def to_json(report: Report) -> str:
    """The whole report as JSON (:func:`json_bytes`, as text)."""
    return json_bytes(report).decode("ascii")


def json_bytes(report: Report) -> bytes:
    """The whole report as JSON (ASCII): :func:`json_chunks` joined."""
    return b"".join(json_chunks(report))


def json_chunks(report: Report, pool: Executor | None = None) -> Iterator[bytes | memoryview]:
    """The whole report as JSON (ASCII), in pieces to write one after the other as they are made: the window,
    and per section its summary, columns, every row and its SQL; one row a line (a window can hold hundreds of
    thousands: rows held as columns are written by column a few thousand at a time,
    :func:`~.column_rows.json_line_pieces`, on ``pool`` ahead of the writer when given; the others each by
    json's C encoder, which an indented document would not use; tuples are JSON arrays as they are)."""
    w = report.window
    head = {
        "cluster": report.cluster,
        "warehouse": report.warehouse,
        "window": {"from_offset": w.lo, "to_offset": w.hi, "from_time_ms": w.lo_ms, "to_time_ms": w.hi_ms},
        "headlines": report.headlines(),
    }
    yield json.dumps(head)[:-1].encode() + b', "sections": [\n  '
    for k, s in enumerate(report.sections):
        about = json.dumps({"key": s.key, "title": s.title, "summary": s.summary, "columns": s.columns})
        yield ((",\n  " if k else "") + about[:-1] + ', "rows": ').encode()
        if not len(s.rows):
            yield b"[]"
        else:
            yield b"[\n    "
            if isinstance(s.rows, ColumnRows):
                yield from json_line_pieces(s.rows, s.columns, pool)
            else:
                yield ROW_SEPARATOR.join(
                    json.dumps(dict(zip(s.columns, map(r.get, s.columns), strict=True))) for r in s.rows
                ).encode()
            yield b"\n  ]"
        yield f', "sql": {json.dumps(s.sql)}}}'.encode()
    yield b"\n]}\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_section(s: Section) -> list[str]:
    out = [f"## {s.title}", ""]
    out += [f"- {line}" for line in s.summary]
    out.append("")
    if s.rows:
        out.append("| " + " | ".join(_heading(c) for c in s.columns) + " |")
        out.append("|" + "---|" * len(s.columns))
        for r in s.rows[:MAX_TABLE_ROWS]:
            out.append("| " + " | ".join(_md_escape(_cell(c, r.get(c))) for c in s.columns) + " |")
        if len(s.rows) > MAX_TABLE_ROWS:
            out.append(f"\n({len(s.rows) - MAX_TABLE_ROWS} more rows: `--format json` has them all)")
        out.append("")
    out += ["<details><summary>SQL</summary>", "", "```sql", s.sql, "```", "", "</details>", ""]
    return out


def _title(report: Report) -> str:
    who = f"cluster {report.cluster}" if report.cluster else "the cluster"
    return f"What happened to {who}"


def to_markdown(report: Report) -> str:
    """The report as Markdown (GitHub's dialect: tables, a collapsed SQL block per section)."""
    lines = [f"# {_title(report)}", "", f"Window: {report.window.text()}", "", "At a glance:", ""]
    lines += [f"- {line}" for line in report.headlines() or ["nothing changed in the window"]]
    lines.append("")
    for s in report.sections:
        lines += _md_section(s)
    return "\n".join(lines)


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { font-size: 1.25em; margin-top: 2em;
       border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
.window { color: #555; } nav a { margin-right: 1em; }
ul.summary li { margin: 0.2em 0; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } tr:nth-child(even) td { background: #fafafa; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
details summary { cursor: pointer; color: #0b5394; }
.empty { color: #777; font-style: italic; }
"""


def _html_table(s: Section) -> str:
    if not s.rows:
        return ""
    head = "".join(f"<th>{html.escape(_heading(c))}</th>" for c in s.columns)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(c, r.get(c)))}</td>" for c in s.columns) + "</tr>"
        for r in s.rows[:MAX_TABLE_ROWS]
    )
    more = (
        f'<p class="empty">{len(s.rows) - MAX_TABLE_ROWS} more rows: <code>--format json</code> has them all</p>'
        if len(s.rows) > MAX_TABLE_ROWS
        else ""
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>{more}"


def _figures(report: Report, data: ReportInput | None) -> dict[str, str]:
    """The pictures above the sections they illustrate (none without the versions)."""
    if data is None:
        return {}
    from kraftlake.plot import figures
    from kraftlake.plot.output import figure_html
    from kraftlake.report.figure_values import with_plain_values
    from kraftlake.report.pictures import availability_counts, broker_segments

    sub = report.window.text()
    out = {}
    segments = broker_segments(data)
    if not segments.empty:
        chart = with_plain_values(figures.broker_figure(segments, subtitle=sub))
        out["brokers"] = figure_html(chart, "figure-brokers")
    counts = availability_counts(data)
    if len(counts) and int(counts["partitions"].max()) > 0:
        chart = with_plain_values(figures.under_replicated_figure(counts, subtitle=sub))
        out["availability"] = figure_html(chart, "figure-availability")
    return out


def to_html(report: Report, data: ReportInput | None = None) -> str:
    """The report as one page that needs no network: its style, Vega's scripts (once) and the pictures' data
    inline."""
    pictures = _figures(report, data)
    script = ""
    if pictures:
        from kraftlake.plot.output import vega_script

        script = f"<script>\n{vega_script()}\n</script>\n"
    title = html.escape(_title(report))
    nav = "".join(f'<a href="#{s.key}">{html.escape(s.title)}</a>' for s in report.sections)
    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f"<title>{title}</title>\n<style>{_STYLE}</style>\n{script}</head>\n<body>\n",
        f'<h1>{title}</h1>\n<p class="window">{html.escape(report.window.text())}',
        f" &middot; warehouse {html.escape(report.warehouse)}</p>\n" if report.warehouse else "</p>\n",
        f"<nav>{nav}</nav>\n",
        '<h2 id="glance">At a glance</h2>\n<ul class="summary">',
        "".join(
            f"<li>{html.escape(line)}</li>"
            for line in report.headlines() or ["nothing changed in the window"]
        ),
        "</ul>\n",
    ]
    for s in report.sections:
        summary = "".join(f"<li>{html.escape(line)}</li>" for line in s.summary)
        parts.append(
            f'<section id="{s.key}">\n<h2>{html.escape(s.title)}</h2>\n<ul class="summary">{summary}</ul>\n'
        )
        parts.append(pictures.get(s.key, ""))
        parts.append(_html_table(s))
        parts.append(
            f"\n<details><summary>SQL</summary><pre>{html.escape(s.sql)}</pre></details>\n</section>\n"
        )
    parts.append("</body>\n</html>\n")
    return "".join(parts)


def render_chunks(
    report: Report, fmt: str, data: ReportInput | None = None, pool: Executor | None = None
) -> Iterator[bytes | memoryview]:
    """``report`` in ``fmt`` (:data:`FORMATS`) as UTF-8 pieces, what a command writes one after the other as
    they are made (the JSON's rows never held whole: :func:`json_chunks`, on ``pool`` ahead of the writer)."""
    if fmt == "json":
        return json_chunks(report, pool)
    return iter((render(report, fmt, data).encode("utf-8"),))


def render(report: Report, fmt: str, data: ReportInput | None = None) -> str:
    """``report`` in ``fmt`` (:data:`FORMATS`)."""
    if fmt == "json":
        return to_json(report)
    if fmt == "md":
        return to_markdown(report)
    if fmt == "html":
        return to_html(report, data)
    raise ValueError(f"unknown report format {fmt!r}: {', '.join(FORMATS)}")
