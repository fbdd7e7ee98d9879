"""The session factory: Delta works from the local jar cache, with time travel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from kraftlake.spark.session import class_archive, delta_jars, read_conf, session_settings


def test_delta_write_update_and_read_an_older_version(spark: Any, tmp_path: Path) -> None:
    from delta.tables import DeltaTable

    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING").write.format("delta").save(path)
    DeltaTable.forPath(spark, path).update("id = 2", {"v": "'B'"})
    spark.createDataFrame([(3, "c")], "id INT, v STRING").write.format("delta").mode("append").save(path)

    now = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    v0 = sorted(tuple(r) for r in spark.read.format("delta").option("versionAsOf", 0).load(path).collect())
    v1 = sorted(tuple(r) for r in spark.sql(f"SELECT * FROM delta.`{path}` VERSION AS OF 1").collect())
    assert v0 == [(1, "a"), (2, "b")]
    assert v1 == [(1, "a"), (2, "B")]
    assert now == [(1, "a"), (2, "B"), (3, "c")]
    history = DeltaTable.forPath(spark, path).history().select("version", "operation").collect()
    assert [(r.version, r.operation) for r in sorted(history)] == [(0, "WRITE"), (1, "UPDATE"), (2, "WRITE")]


def test_session_uses_cached_jars_and_this_interpreter(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    jars = conf.get("spark.jars").split(",")
    assert any("delta-spark_" in j for j in jars)
    assert all(Path(j).is_file() for j in jars)
    assert conf.get("spark.jars.packages", None) is None
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    # Python workers run the virtualenv's interpreter
    worker_exe = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable).collect()
    assert worker_exe == [sys.executable]
    assert conf.get("spark.sql.shuffle.partitions") == read_conf()["spark.sql.shuffle.partitions"]


def test_jars_pyspark_ships_are_left_out() -> None:
    names = [j.name for j in delta_jars()]
    assert any(n.startswith("delta-storage-") for n in names)
    shipped = ("jackson-core-", "jackson-databind-", "hadoop-client-", "parquet-", "log4j-", "slf4j-")
    assert not any(n.startswith(shipped) for n in names)


def test_the_driver_maps_the_class_archive_setup_recorded(spark: Any) -> None:
    archive = class_archive()
    assert archive.is_file(), f"{archive}: `make setup` records it (python -m jobs.class_archive)"
    jvm = spark.sparkContext._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in args
    # the JVM maps an archive it can use (same JDK, same class path) and silently ignores one it cannot: the
    # mapped size says which (the JDK's own base archive alone is a few tens of MiB)
    jcmd = shutil.which("jcmd") or str(Path(jvm.System.getProperty("java.home"), "bin", "jcmd"))
    pid = str(jvm.ProcessHandle.current().pid())
    info = subprocess.run([jcmd, pid, "VM.info"], capture_output=True, text=True, timeout=60).stdout
    mapped = re.search(r"CDS archive\(s\) mapped at: .*?size (\d+)", info)
    assert mapped is not None, info[:2000]
    assert int(mapped.group(1)) >= archive.stat().st_size
    conf = spark.sparkContext.getConf()
    assert all(str(j) in conf.get("spark.driver.extraClassPath") for j in delta_jars())


def test_a_callers_java_options_and_class_path_keep_kraftlakes(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    ours = session_settings(log_file=log, verbose=False)
    conf = {
        "spark.driver.extraJavaOptions": "-Xss4m -Dkraftlake.console.level=warn",
        "spark.executor.extraJavaOptions": "-Xss8m",
        "spark.driver.extraClassPath": "/opt/site/extra.jar",
    }
    got = session_settings(conf=conf, log_file=log, verbose=False)
    # kraftlake's options first, the caller's after them: of a JVM option given twice the later wins
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert got[key] == f"{ours[key]} {conf[key]}"
    driver = got["spark.driver.extraJavaOptions"].split()
    assert any(o.startswith("-Dlog4j.configurationFile=file:") for o in driver)
    assert f"-Dkraftlake.log.file={log.resolve()}" in driver
    assert driver.index("-Dkraftlake.console.level=off") < driver.index("-Dkraftlake.console.level=warn")
    if class_archive().is_file():
        assert f"-XX:SharedArchiveFile={class_archive()}" in driver
    # Delta's jars stay on the driver's class path, ahead of the caller's (the class archive's prefix)
    path = got["spark.driver.extraClassPath"].split(os.pathsep)
    assert path == [*(str(j) for j in delta_jars()), "/opt/site/extra.jar"]
    assert ours["spark.driver.extraClassPath"].split(os.pathsep) == path[:-1]


def test_the_driver_gets_the_throughput_collector_unless_the_caller_chose_one(tmp_path: Path) -> None:
    from kraftlake.spark.session import DRIVER_GC

    log = tmp_path / "spark.log"
    ours = session_settings(log_file=log, verbose=False)["spark.driver.extraJavaOptions"].split()
    assert ours.count(DRIVER_GC) == 1
    # two collectors stop the JVM from starting: the caller's alone
    chosen = session_settings(conf={"spark.driver.extraJavaOptions": "-Xss4m -XX:+UseG1GC"}, log_file=log)
    driver = chosen["spark.driver.extraJavaOptions"].split()
    assert "-XX:+UseG1GC" in driver and DRIVER_GC not in driver
    assert session_settings()["spark.sql.adaptive.enabled"] == "false"
