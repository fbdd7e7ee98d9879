"""Delta Lake tables read and committed by kraftlake itself, without Spark: blind appends (:mod:`.append`),
file rewrites (:mod:`.rewrite`), deletion vectors (:mod:`.deletion_vectors`), and a reader of a table's live
rows with a filter pushed down (:mod:`.snapshot`, :mod:`.scan`)."""
