"""The order of a data file's rows and the cut of its row groups, chosen so that a reader of an offset window
(a report's day, a state at one offset) decodes only the row groups that can hold it: :mod:`.scan` skips the
others by their Parquet statistics.

- A history table's versions (``from_offset`` and ``to_offset``): ordered by ``to_offset``, the versions
  still open (NULL) last and ordered by ``from_offset``. A file holds the versions one slice of the log made,
  whose starts lie close together and whose ends lie anywhere after them; ordered by their ends, the versions
  closed before a window fill whole row groups whose largest ``to_offset`` says so, and the open ones starting
  after it row groups whose smallest ``from_offset`` does. Ordered by their starts instead, a row group would
  mix old and long-lived versions and almost none could be skipped.
- A table of records (``offset``, ``metadata_log``): ordered by offset.
- Any other table: its rows as given.

Row groups hold :data:`ROW_GROUP_ROWS` rows: small enough that a window of a day among a month of versions
skips most of a file, large enough that a row group is still megabytes of a wide table and its column chunks
stay efficient to scan for Spark.
"""

from __future__ import annotations

import pyarrow as pa

#: Rows per row group of a data file that kraftlake writes.
ROW_GROUP_ROWS = 32_768

#: The columns of a history table's validity range.
FROM, TO = "from_offset", "to_offset"
#: The column of a table of records.
OFFSET = "offset"


def laid_out(rows: pa.Table) -> pa.Table:
    """``rows`` in the order their table's data files keep (see the module's docstring)."""
    names = set(rows.column_names)
    if rows.num_rows < 2:
        return rows
    if FROM in names and TO in names:
        return rows.sort_by([(TO, "ascending", "at_end"), (FROM, "ascending", "at_end")])
    if OFFSET in names:
        return rows.sort_by([(OFFSET, "ascending")])
    return rows
