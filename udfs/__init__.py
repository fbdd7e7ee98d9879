"""The SQL surface over a warehouse: what a Spark session calls by name.

- :mod:`udfs.sql`: the table functions (``partitions_at(N)``, ``brokers_at_time(ts)``, ``isr_history(t, p)``
  ...) registered for a session (``register``: the Python UDTFs of :mod:`udfs.table_functions`), the same
  functions as SQL, and ``warehouse_errors`` for their refusals;
- :mod:`udfs.catalog`: the SQL functions stored permanently in a catalog (``kraftlake functions``);
- :mod:`udfs.records`: Arrow UDFs over ``metadata_log``'s record bytes, ``decode_record`` (the typed struct)
  and ``kafka_json`` (dump-log's JSON text).
"""
