"""Delta Lake tables read and committed by kraftlake itself, without Spark: blind appends (:mod:`.append`),
checkpoints (:mod:`.checkpoint`), file rewrites and a table's snapshot (:mod:`.rewrite`), deletion vectors
(:mod:`.deletion_vectors`), the order of a data file's rows (:mod:`.layout`), and a reader of a table's live rows
with a filter pushed down (:mod:`.scan`).

Not Kafka's ``MetadataDelta`` (:mod:`kraftlake.image.delta`): "Delta" here is the table format. Of kraftlake it
imports only :mod:`kraftlake.errors`, and beside it only pyarrow and numpy: no JVM, so it sits low in the layers
and the pure readers of a warehouse (:mod:`kraftlake.warehouse`) build on it."""
