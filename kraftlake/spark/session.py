"""One factory for every SparkSession kraftlake builds: Delta enabled from the local jar cache.

`make setup` fetches Delta's jars with Maven into ``<repo>/.cache/jars/delta`` (or ``$KRAFTLAKE_JARS/delta``);
this module hands them to Spark as ``spark.jars``, so nothing is resolved from the network when a session
starts. Jars whose artifact pyspark already ships (jackson, hadoop, parquet, log4j, ...) are left out: pyspark's
own versions are the ones Spark was built against.

Start-up: the driver JVM spends seconds loading and verifying the same classes every time. `make setup` records
them once in a class-data archive (AppCDS, ``-XX:ArchiveClassesAtExit``) by running a small ingest, query and
compaction (``jobs/class_archive.py``); sessions started here map that archive (``-XX:SharedArchiveFile``). The
archive covers the JVM's class path, so Delta's jars go on the driver's class path too
(``spark.driver.extraClassPath``), not only on ``spark.jars`` (the Thrift JDBC server needs them there as well:
it opens each session on a thread whose class loader does not see ``spark.jars``). An archive the JVM cannot use (another JDK, other
jars) is ignored by the JVM itself; a missing one only costs the seconds. ``KRAFTLAKE_CLASS_ARCHIVE=off`` starts
sessions without it (the benchmark's baseline).

Logging: the driver reads ``conf/log4j2.properties``. A session built with ``log_file`` writes Spark's and Delta's
warnings there and, unless ``verbose``, none to the console; pyspark's own Python loggers (the query-context
loggers that print an error Spark raised as JSON, py4j) go the same way (:func:`route_python_logs`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from kraftlake.errors import KraftlakeError

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONF = REPO_ROOT / "conf" / "spark-defaults.conf"
#: What makes a session Delta-enabled; applied even where conf/spark-defaults.conf is not at hand (a job run
#: from the --py-files archive on a cluster).
DELTA_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")


class SparkSetupError(KraftlakeError):
    """Raised when a session cannot be built: Delta's jars are missing or the conf file is malformed."""


def jar_cache() -> Path:
    """The root of the jar cache `make setup` fills."""
    return Path(os.environ.get("KRAFTLAKE_JARS", REPO_ROOT / ".cache" / "jars"))


def _artifact(jar: Path) -> str:
    match = _VERSIONED_JAR.match(jar.name)
    return match.group("artifact") if match else jar.stem


def delta_jars(cache: Path | None = None) -> list[Path]:
    """Delta's jars from the cache, less the artifacts pyspark already ships."""
    folder = (cache or jar_cache()) / "delta"
    jars = sorted(folder.glob("*.jar"))
    if not any(j.name.startswith("delta-spark_") for j in jars):
        raise SparkSetupError(f"Delta's jars are not in {folder}: run `make setup`")
    import pyspark

    shipped = {_artifact(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [j for j in jars if _artifact(j) not in shipped]


def class_archive(cache: Path | None = None) -> Path:
    """Where the driver JVM's class-data archive is (or goes): named by what its classes come from (the Java
    binary, pyspark's version and jars, Delta's jars), so that a new JDK or new jars get an archive of their own.

    The jars count with their size and modification time: the JVM ignores an archive whose class path jars
    changed on disk (copied again by a setup), so such jars need an archive recorded again."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else Path(shutil.which("java") or "java")
    pyspark_jars = Path(pyspark.__file__).parent / "jars"
    jars = [pyspark_jars, *delta_jars(cache)]
    stamps = [f"{j.name}:{j.stat().st_size}:{j.stat().st_mtime_ns}" for j in jars if j.exists()]
    source = "\n".join([str(java.resolve()), pyspark.__version__, *stamps])
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return (cache or jar_cache()) / "cds" / f"spark-{digest}.jsa"


#: The JVM's messages about its class-data archive (one it cannot map, classes it leaves out while writing one)
#: are not the user's concern: the archive is an optimisation.
_CDS_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
#: The driver's collector where the caller chose none: the throughput collector spends less of two cores than
#: G1's concurrent threads on a driver whose garbage is short-lived (query plans, task closures).
DRIVER_GC = "-XX:+UseParallelGC"
#: A JVM option choosing a collector (two of them stop the JVM from starting).
_GC_OPTION = re.compile(r"-XX:\+Use\w+GC\b")


def read_conf(path: Path = DEFAULT_CONF) -> dict[str, str]:
    """Parse a spark-defaults.conf file: ``key value`` per line, ``#`` comments."""
    conf: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise SparkSetupError(f"{path}:{number}: expected 'key value', got {line!r}")
        conf[parts[0]] = parts[1].strip()
    return conf


def submitted_conf() -> dict[str, str]:
    """The settings spark-submit gave this driver (empty when Python started the JVM itself)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, whose system properties hold its conf
    return dict(SparkConf().getAll())


#: pyspark's Python loggers that write to stderr themselves: PySparkLogger gives each a stream handler of its own
#: (a JSON line per error a query raised, printed before the exception reaches the caller).
PYTHON_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger", "py4j", "pyspark")


def route_python_logs(log_file: Path | None, verbose: bool) -> None:
    """Send pyspark's and py4j's Python log records to ``log_file`` (stderr too when ``verbose``).

    Without a log file and verbose, the loggers keep pyspark's defaults."""
    if log_file is None and verbose:
        return
    from pyspark.logger import PySparkLogger

    handlers: list[logging.Handler] = []
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        to_file = logging.FileHandler(log_file, encoding="utf-8")
        to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(to_file)
    if verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
    for name in PYTHON_LOGGERS:
        # created now, so that PySparkLogger's own stderr handler exists to be replaced
        logger = PySparkLogger.getLogger(name) if name.endswith("ContextLogger") else logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        for handler in handlers:
            logging.Logger.addHandler(logger, handler)  # plain text, not PySparkLogger's JSON
        logger.propagate = False
        if not handlers:
            logger.addHandler(logging.NullHandler())


def logging_options(log_file: Path | None, verbose: bool) -> str:
    """The JVM system properties ``conf/log4j2.properties`` reads: the log file and the console's level."""
    options = [f"-Dkraftlake.console.level={'warn' if verbose else 'off'}"]
    if log_file is not None:
        options.append(f"-Dkraftlake.log.file={log_file.resolve()}")
    return " ".join(options)


def _joined(settings: dict[str, str], key: str, ours: str, sep: str) -> None:
    """``ours`` put before the value the caller gave ``key`` (if any), not replacing it."""
    given = settings.get(key)
    settings[key] = f"{ours}{sep}{given}" if given else ours


def session_settings(
    conf: Mapping[str, str] | None = None,
    conf_file: Path = DEFAULT_CONF,
    warehouse: Path | None = None,
    log_file: Path | None = None,
    verbose: bool = True,
    archive_classes_at_exit: Path | None = None,
) -> dict[str, str]:
    """The settings :func:`build_session` gives a session it starts (its parameters' meaning).

    The caller's ``spark.driver.extraJavaOptions`` / ``spark.executor.extraJavaOptions`` (in ``conf`` or the
    conf file) keep kraftlake's logging options and class archive, placed before the caller's: of two values of
    the same JVM option the later wins, so the caller's does. A caller's ``spark.driver.extraClassPath`` keeps
    Delta's jars, before its own entries (the class archive maps only over the class path it was recorded with,
    which may be followed by more).
    """
    settings = dict(DELTA_SETTINGS)
    if conf_file.is_file():
        settings.update(read_conf(conf_file))
    settings.update(conf or {})
    submitted = submitted_conf()
    if submitted:
        # under spark-submit its --master, --jars and --conf win over our local defaults (spark.master local[2]
        # would otherwise turn a cluster job into a local one); Delta's jars must come with --jars there, as
        # the driver JVM is already running when this code starts
        settings = {k: v for k, v in settings.items() if k not in submitted}
    jars = [] if "spark.jars" in submitted else [str(j) for j in delta_jars()]
    if jars:
        extra = settings.pop("spark.jars", "")
        settings["spark.jars"] = ",".join([*jars, *([extra] if extra else [])])
    if not submitted:
        _joined(settings, "spark.driver.extraClassPath", os.pathsep.join(jars), os.pathsep)
    log4j = REPO_ROOT / "conf" / "log4j2.properties"
    if log4j.exists() and not submitted:
        option = f"-Dlog4j.configurationFile=file:{log4j}"
        if log_file is not None or not verbose:
            option = f"{option} {logging_options(log_file, verbose)}"
        _joined(settings, "spark.executor.extraJavaOptions", option, " ")
        archive = class_archive()
        if archive_classes_at_exit is not None:
            option = f"{option} -XX:ArchiveClassesAtExit={archive_classes_at_exit} {_CDS_QUIET}"
        elif archive.is_file() and os.environ.get("KRAFTLAKE_CLASS_ARCHIVE", "on") != "off":
            option = f"{option} -XX:SharedArchiveFile={archive} {_CDS_QUIET}"
        if not _GC_OPTION.search(settings.get("spark.driver.extraJavaOptions", "")):
            option = f"{option} {DRIVER_GC}"
        _joined(settings, "spark.driver.extraJavaOptions", option, " ")
    if warehouse is not None:
        settings["spark.sql.warehouse.dir"] = str(Path(warehouse).resolve())
    return settings


def build_session(
    app_name: str = "kraftlake",
    conf: Mapping[str, str] | None = None,
    conf_file: Path = DEFAULT_CONF,
    warehouse: Path | None = None,
    log_file: Path | None = None,
    verbose: bool = True,
    archive_classes_at_exit: Path | None = None,
) -> SparkSession:
    """Build (or return the running) SparkSession with Delta enabled.

    Parameters
    ----------
    app_name:
        The Spark application name.
    conf:
        Settings that override ``conf_file``.
    conf_file:
        A spark-defaults.conf; the project's ``conf/spark-defaults.conf`` by default.
    warehouse:
        ``spark.sql.warehouse.dir`` for managed tables and persistent functions.
    log_file:
        Where Spark's JVM warnings and pyspark's Python log records go (beside the console when ``verbose``).
    verbose:
        False: nothing from Spark's logging on the console (the JVM's own stderr goes to ``log_file``). Applies to
        a session this call starts; a running session keeps its JVM's settings.
    archive_classes_at_exit:
        Write the class-data archive there when the JVM exits (see the module's docstring), instead of using
        :func:`class_archive`.
    """
    # Python workers (UDFs, data sources) must run this interpreter, not whatever python3 is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = session_settings(conf, conf_file, warehouse, log_file, verbose, archive_classes_at_exit)
    route_python_logs(log_file, verbose)
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    quiet_jvm = None if verbose else log_file
    try:
        with _jvm_stderr(quiet_jvm):
            return builder.getOrCreate()
    except Exception as exc:
        if quiet_jvm is None or "JAVA_GATEWAY_EXITED" not in str(exc):
            raise
        # the JVM's own reason went to the log file: say where, with its last lines
        tail = quiet_jvm.read_text(errors="replace").strip().splitlines()[-5:] if quiet_jvm.exists() else []
        raise SparkSetupError(
            f"the Spark driver JVM did not start (its output: {quiet_jvm})"
            + "".join(f"\n  {t}" for t in tail)
        ) from exc


@contextmanager
def _jvm_stderr(log_file: Path | None) -> Iterator[None]:
    """While a session starts, file descriptor 2 is ``log_file``: the driver JVM started meanwhile inherits it
    as its stderr, so what the JVM itself prints there (a warning about the incubator modules Spark adds,
    before any logging is set up) goes to the log and not the user's terminal. Python's stderr is restored
    after."""
    if log_file is None:
        yield
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)
