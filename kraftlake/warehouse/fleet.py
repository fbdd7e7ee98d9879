"""A fleet: the Kafka clusters one ``stream --source kafka`` follows into one warehouse, each under its name.

Given on the command line (``--cluster NAME=HOST:PORT[,HOST:PORT...]``, repeatable) or in a fleet file
(``--clusters FILE``), one cluster a line::

    # name   controller listeners            client properties (optional)
    east     10.0.0.1:9093,10.0.0.2:9093     --command-config east.properties
    west     1@10.1.0.1:9093

A ``--command-config`` path relative to the file is taken from the file's directory. A name given twice (on
the command line, in the file or across both) is refused: two streams of one name would be the same cluster's.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from kraftlake.errors import KraftlakeError
from kraftlake.follow.bootstrap import parse_bootstrap
from kraftlake.warehouse.clusters import name_refusal


class FleetError(KraftlakeError):
    """Raised for a fleet that cannot be followed as given: a malformed ``--cluster`` item or fleet-file line
    (naming ``file:line``), a name given twice."""


@dataclass(frozen=True)
class FleetMember:
    """One cluster of a fleet: its name in the warehouse, its controller listeners, its client properties."""

    name: str
    bootstrap: str
    command_config: str | None = None
    where: str = "--cluster"
    """Where it was given (``--cluster`` or ``FILE:LINE``), for the refusals."""


def _member(name: str, bootstrap: str, command_config: str | None, where: str) -> FleetMember:
    why = name_refusal(name)
    if why is not None:
        raise FleetError(f"{where}: {why}")
    try:
        parse_bootstrap(bootstrap)
    except ValueError as exc:
        raise FleetError(f"{where}: cluster {name!r}: {exc}") from None
    return FleetMember(name, bootstrap, command_config, where)


def parse_member(text: str, command_config: str | None = None) -> FleetMember:
    """``NAME=HOST:PORT[,HOST:PORT...]`` (``ID@HOST:PORT`` items too: :func:`parse_bootstrap`)."""
    name, sep, bootstrap = text.partition("=")
    if not sep or not name.strip() or not bootstrap.strip():
        raise FleetError(f"--cluster {text!r}: a cluster of a fleet is NAME=HOST:PORT[,HOST:PORT...]")
    return _member(name.strip(), bootstrap.strip(), command_config, f"--cluster {name.strip()}")


def read_fleet_file(path: str | Path) -> list[FleetMember]:
    """The clusters of a fleet file (see the module's docstring), in its order."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetError(f"fleet file {file}: cannot be read: {exc}") from None
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{file}:{number}"
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise FleetError(f"{where}: {exc}") from None
        if not words:
            continue
        config = None
        if len(words) == 4 and words[2] == "--command-config":
            config = str(file.parent / words[3])  # an absolute path stays as it is
        elif len(words) != 2:
            raise FleetError(
                f"{where}: expected NAME HOST:PORT[,HOST:PORT...] [--command-config PATH], got {line.strip()!r}"
            )
        out.append(_member(words[0], words[1], config, where))
    if not out:
        raise FleetError(f"fleet file {file}: no cluster in it (one a line: NAME HOST:PORT[,...])")
    return out


def check_unique(members: list[FleetMember]) -> list[FleetMember]:
    """``members``, refused when a name is given twice (naming both places)."""
    seen: dict[str, FleetMember] = {}
    for m in members:
        first = seen.setdefault(m.name, m)
        if first is not m:
            raise FleetError(
                f"cluster name {m.name!r} is given twice ({first.where} and {m.where}): one name, one cluster"
            )
    return members
