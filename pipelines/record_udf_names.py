"""The names of the record UDFs (:data:`udfs.records.UDFS`) and whether a query calls one.

A client session and the SQL route's request sessions register the record UDFs only for a query that names
one; the names are kept here, apart from :mod:`udfs.records`, so that deciding imports neither the record
decoders nor pyspark, and apart from :mod:`pipelines.serve` and :mod:`pipelines.sql_route`, which both ask.
"""

from __future__ import annotations

import re

#: The Python UDFs a client session registers (:data:`udfs.records.UDFS`).
RECORD_UDFS = ("decode_record", "kafka_json")


def calls_record_udfs(query: str) -> bool:
    """Whether ``query`` names one of :data:`RECORD_UDFS` (function names are case-insensitive)."""
    return re.search(rf"\b(?:{'|'.join(RECORD_UDFS)})\b", query, re.IGNORECASE) is not None
