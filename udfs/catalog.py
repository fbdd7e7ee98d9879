"""Persistent SQL functions: the table functions of :mod:`udfs.sql` kept in a catalog database.

``udfs.sql.register`` creates TEMPORARY functions, which live as long as one session. Permanent ones
(``CREATE FUNCTION db.partitions_at(...) RETURNS TABLE ... RETURN ...``, Spark 4's SQL table functions) are
stored in the session catalog's metastore, so every later session using that metastore resolves
``kraftlake.partitions_at(N)`` without registering anything. Spark's in-memory catalog forgets them at exit,
so a persistent catalog is needed: Spark's Hive support (``spark.sql.catalogImplementation=hive``, whose jars
pyspark ships) with

- the user's Hive metastore (a metastore service, ``spark.hadoop.hive.metastore.uris=thrift://...``, or a
  MySQL/PostgreSQL-backed one) configured for the session: the ``session`` mode; or
- for local use, an embedded Derby metastore under ``<warehouse>/_metastore``: the ``local`` mode,
  :func:`metastore_conf`. Embedded Derby allows ONE JVM at a time: while a session holds it, another process
  opening it fails (:class:`CatalogError` says so). Share functions between concurrent processes through a
  metastore service instead.

The function bodies name the warehouse tables by absolute path (``delta.`/abs/path` ``), so they stay valid
for any session that can read those paths. The warehouse tables themselves are registered too, as external
Delta tables of the database (``kraftlake.partitions``); dropping them never touches the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from kraftlake.errors import KraftlakeError
from kraftlake.spark.tables.layout import BOUNDS, CLOSES, HISTORY_TABLES, LOG, OFFSETS, SNAPSHOTS, table_path
from udfs.sql import register

METASTORE_DIR = "_metastore"
DEFAULT_DATABASE = "kraftlake"
#: The warehouse tables registered in the database (``quarantine`` too when validation created it).
CATALOG_TABLES = (LOG, *HISTORY_TABLES, CLOSES, SNAPSHOTS, OFFSETS, BOUNDS, "quarantine")
_DERBY_IN_USE = ("Another instance of Derby may have already booted the database", "XSDB6")


class CatalogError(KraftlakeError):
    """Raised when the functions cannot be made persistent: no persistent catalog, or its metastore is busy."""


@dataclass
class FunctionsResult:
    database: str
    catalog: str
    functions: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    metastore: str | None = None


def local_metastore(warehouse: str | Path) -> Path:
    """The directory of the warehouse's embedded Derby metastore."""
    return Path(warehouse).resolve() / METASTORE_DIR


def metastore_conf(warehouse: str | Path, metastore_dir: str | Path | None = None) -> dict[str, str]:
    """Session settings that open the embedded Derby metastore of ``warehouse`` (static: set at start-up)."""
    ms = Path(metastore_dir).resolve() if metastore_dir is not None else local_metastore(warehouse)
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={ms / 'metastore_db'};create=true",
        # managed tables and databases created without LOCATION land beside the metastore, not in the cwd
        "spark.sql.warehouse.dir": str(ms / "warehouse"),
    }


def configured_catalog(conf: Mapping[str, str]) -> str:
    """The catalog implementation ``conf`` asks for (Spark's default is the in-memory one)."""
    return conf.get("spark.sql.catalogImplementation", "in-memory")


def open_session(
    app_name: str,
    warehouse: str | Path,
    metastore_dir: str | Path | None = None,
    log_file: Path | None = None,
    verbose: bool = True,
) -> SparkSession:
    """A session over the embedded Derby metastore of ``warehouse`` (its derby.log kept beside it); ``log_file``
    and ``verbose`` as :func:`kraftlake.spark.session.build_session` takes them."""
    from kraftlake.spark.session import build_session

    ms = Path(metastore_dir).resolve() if metastore_dir is not None else local_metastore(warehouse)
    ms.mkdir(parents=True, exist_ok=True)
    spark = build_session(app_name, conf=metastore_conf(warehouse, ms), log_file=log_file, verbose=verbose)
    # Derby reads this when it boots, on the catalog's first use (after this): not a derby.log in the cwd
    system = spark.sparkContext._jvm.java.lang.System  # type: ignore[union-attr]
    if system.getProperty("derby.stream.error.file") is None:
        system.setProperty("derby.stream.error.file", str(ms / "derby.log"))
    if _catalog_of(spark) != "hive":
        raise CatalogError(
            "the running session has no Hive support (a session started before this one, or "
            "spark-submit without spark.sql.catalogImplementation=hive)"
        )
    return spark


def _catalog_of(spark: SparkSession) -> str:
    return str(spark.conf.get("spark.sql.catalogImplementation", "in-memory"))


def _explain(exc: Exception, spark: SparkSession) -> Exception:
    text = str(exc)
    if any(marker in text for marker in _DERBY_IN_USE):
        url = spark.sparkContext.getConf().get("spark.hadoop.javax.jdo.option.ConnectionURL", "")
        return CatalogError(
            f"the embedded Derby metastore ({url}) is open in another process: embedded Derby allows one JVM "
            "at a time; stop that process, or share the functions through a Hive metastore service "
            "(spark.hadoop.hive.metastore.uris=thrift://...)"
        )
    return exc


def _register_tables(spark: SparkSession, warehouse: str | Path, database: str) -> list[str]:
    out = []
    for name in CATALOG_TABLES:
        path = table_path(warehouse, name)
        if not Path(path, "_delta_log").is_dir():
            continue
        qualified = f"`{database}`.`{name}`"
        if spark.catalog.tableExists(name, database):
            kind = spark.catalog.getTable(f"{database}.{name}").tableType
            if kind != "EXTERNAL":
                raise CatalogError(f"{database}.{name} is a {kind} table, not kraftlake's: not replaced")
            # dropping an external table leaves its files alone; recreating it follows a moved warehouse
            spark.sql(f"DROP TABLE {qualified}")
        spark.sql(f"CREATE TABLE {qualified} USING DELTA LOCATION '{path}'")
        out.append(f"{database}.{name}")
    return out


def create_functions(
    spark: SparkSession, warehouse: str | Path, database: str = DEFAULT_DATABASE, tables: bool = True
) -> FunctionsResult:
    """Create ``database`` and the persistent table functions over ``warehouse`` in ``spark``'s catalog.

    Idempotent (``CREATE OR REPLACE``). Raises :class:`CatalogError` when the session's catalog is Spark's
    in-memory one, where the functions would vanish with the session.
    """
    catalog = _catalog_of(spark)
    if catalog != "hive":
        raise CatalogError(
            f"the session's catalog is {catalog!r}: persistent functions need a persistent "
            "catalog (spark.sql.catalogImplementation=hive with a metastore)"
        )
    if not Path(table_path(warehouse, OFFSETS), "_delta_log").is_dir():
        raise CatalogError(f"{warehouse} holds no kraftlake warehouse (no {OFFSETS} table): run ingest first")
    result = FunctionsResult(database, catalog)
    try:
        spark.sql(
            f"CREATE DATABASE IF NOT EXISTS `{database}` "
            f"COMMENT 'kraftlake: the metadata log state at offset N over {Path(warehouse).resolve()}'"
        )
        result.functions = register(spark, warehouse, temporary=False, database=database)
        if tables:
            result.tables = _register_tables(spark, warehouse, database)
    except Exception as exc:
        raise _explain(exc, spark) from exc
    result.metastore = spark.sparkContext.getConf().get(
        "spark.hadoop.javax.jdo.option.ConnectionURL", None
    ) or spark.sparkContext.getConf().get("spark.hadoop.hive.metastore.uris", None)
    return result


def conf_flags(conf: Mapping[str, str]) -> list[str]:
    """``--conf k=v`` arguments that give ``pyspark`` / ``spark-sql`` the same metastore."""
    return [f"--conf {k}={v}" for k, v in conf.items()]
