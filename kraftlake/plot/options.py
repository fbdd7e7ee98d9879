"""What a plot request names, parsed and checked before Spark starts (a refusal costs no JVM start-up)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from kraftlake.errors import KraftlakeError
from kraftlake.image.render import CONFIG_RESOURCE_TYPES

#: kind -> what its figure shows
KINDS: dict[str, str] = {
    "under-replicated": "under-replicated and offline partitions over time (step lines)",
    "partition": "a partition's leader and ISR members over time (Gantt; --topic, --partition)",
    "brokers": "broker states over time: registered, fenced, in controlled shutdown, unregistered (Gantt; --broker)",
    "configs": "each config key's value of a resource over time (Gantt; --resource TYPE:NAME)",
}


class PlotError(KraftlakeError):
    """Raised when a plot cannot be made as asked: an argument that names nothing plottable, an output format
    other than HTML, PNG and SVG, or nothing to draw."""


@dataclass(frozen=True)
class Bound:
    """One end of a plot's range: an offset, or a wall-clock time (UTC epoch milliseconds) whose state is the
    one at the last record at or before it (as ``<entity>_at_time``)."""

    offset: int | None = None
    time_ms: int | None = None
    text: str = ""


def parse_bound(text: str) -> Bound:
    """``1234`` (an offset) or an ISO-8601 time (``2026-11-22T07:00:00``, ``...Z``, ``...+02:00``); a time
    without a zone is UTC, the zone of the figures' axes."""
    value = text.strip()
    if value.isdigit():
        return Bound(offset=int(value), text=text)
    if value.startswith("-") and value[1:].isdigit():
        raise PlotError(f"{text!r}: an offset cannot be negative")
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise PlotError(
            f"{text!r} is neither an offset nor an ISO-8601 time (e.g. 2026-11-22T07:00:00Z)"
        ) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return Bound(time_ms=int(at.timestamp() * 1000), text=text)


def parse_resource(text: str) -> tuple[str, str]:
    """``TYPE:NAME`` -> (the resource type as the ``configs`` table names it, the name): ``topic:orders``,
    ``broker:1``, ``broker:`` (the cluster-wide broker defaults, whose name is empty)."""
    kind, sep, name = text.partition(":")
    names = {v.lower(): v for k, v in CONFIG_RESOURCE_TYPES.items() if k}
    if not sep or kind.strip().lower() not in names:
        raise PlotError(
            f"--resource {text!r}: expected TYPE:NAME with TYPE one of "
            f"{', '.join(sorted(names))} (e.g. topic:orders, broker:1, broker: for the defaults)"
        )
    return names[kind.strip().lower()], name


@dataclass(frozen=True)
class PlotRequest:
    """One figure asked for: its kind, range and the entity it is about."""

    kind: str
    start: Bound | None = None
    end: Bound | None = None
    topic: str | None = None
    partition: int | None = None
    broker: int | None = None
    resource: tuple[str, str] | None = None

    def check(self) -> PlotRequest:
        """Refuse a request its kind cannot draw; returns itself."""
        if self.kind not in KINDS:
            raise PlotError(f"unknown plot kind {self.kind!r}: one of {', '.join(KINDS)}")
        if self.kind == "partition" and (self.topic is None or self.partition is None):
            raise PlotError("plot partition needs --topic and --partition")
        if self.kind == "configs" and self.resource is None:
            raise PlotError("plot configs needs --resource TYPE:NAME (e.g. topic:orders)")
        if self.partition is not None and self.partition < 0:
            raise PlotError(f"--partition {self.partition} is negative")
        s, e = self.start, self.end
        if (
            s is not None
            and e is not None
            and s.offset is not None
            and e.offset is not None
            and s.offset > e.offset
        ):
            raise PlotError(f"--from {s.offset} is above --to {e.offset}")
        if (
            s is not None
            and e is not None
            and s.time_ms is not None
            and e.time_ms is not None
            and s.time_ms > e.time_ms
        ):
            raise PlotError(f"--from {s.text} is after --to {e.text}")
        return self
