"""The warehouse answered without Spark: its Delta tables read with :mod:`kraftlake.delta` (:mod:`.tables`), and
the SQL functions' answers and refusals computed from them (:mod:`.answers`)."""
