"""``kraftlake serve``: the functions answer through Spark Connect and JDBC as in-process and as the oracle.

One server per module (a subprocess: its own driver, Connect and JDBC on 127.0.0.1, free ports), started with
a token so that the refusal of a client without it is tested too; it is stopped with SIGTERM by the last test
(or, if that one did not run, when the module ends). The Connect client runs in this process (pyspark's
Connect session; it does not touch the shared local session), JDBC through pyspark's own ``bin/beeline``.
"""

from __future__ import annotations

import io
import json
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kraftlake.history import entity_rows
from kraftlake.image import image_at
from kraftlake.image.source import log_records
from kraftlake.sim.workloads.entities import write_synthetic_log
from kraftlake.spark.tables.layout import history_columns
from pipelines.serve import REPO, command_env, serve_process

TOKEN = "kraftlake-test-" + secrets.token_hex(8)
ENTITIES_COMPARED = ("partitions", "brokers")


@dataclass
class Served:
    proc: subprocess.Popen[str]
    connect: str  # sc://localhost:P, without the token
    jdbc: str
    log: Path

    @property
    def port(self) -> int:
        return int(self.connect.rsplit(":", 1)[1])

    @property
    def with_token(self) -> str:
        return f"{self.connect}/;token={TOKEN}"


def _cli(args: list[str], **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kraftlake.cli", *args],
        cwd=REPO,
        env=command_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _canon(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> tuple[Path, Path, list[int]]:
    from pipelines.ingest import ingest

    root = tmp_path_factory.mktemp("serve")
    log_dir = write_synthetic_log(root / "log", seed=7, steps=80)
    warehouse = root / "warehouse"
    ingest(spark, log_dir, warehouse, batch_records=1000)
    last = max(r.offset for r in log_records(log_dir))
    return log_dir, warehouse, [last // 3, (2 * last) // 3, last]


@pytest.fixture(scope="module")
def server(small: tuple[Path, Path, list[int]], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("server")
    token_file = root / "token"
    token_file.write_text(TOKEN + "\n")
    log = root / "serve.log"
    options = ("--port", "0", "--jdbc-port", "0", "--token-file", str(token_file))
    with serve_process(small[1], log, *options, env=command_env()) as (proc, urls):
        yield Served(proc, urls["Spark Connect"], urls["JDBC"], log)


def _offsets_query(entity: str, offsets: list[int]) -> str:
    values = ", ".join(f"({n})" for n in offsets)
    return f"SELECT o.n AS at_offset, f.* FROM VALUES {values} AS o(n), LATERAL {entity}_at(o.n) f"


def _jdbc_value(text: str, sql_type: str) -> Any:
    """A beeline tsv2 cell as the value pyspark gives for ``sql_type``."""
    if text == "NULL":
        return None
    if sql_type in ("INT", "BIGINT"):
        return int(text)
    if sql_type == "BOOLEAN":
        return {"true": True, "false": False}[text]
    if sql_type.startswith(("ARRAY", "STRUCT")):
        return json.loads(text)  # the Thrift server writes nested values as JSON
    return text


def _beeline(jdbc: str, queries: list[str], tmp_path: Path) -> list[list[list[str]]]:
    """Run the queries in one beeline process; each result set as its rows of cells (header first)."""
    import pyspark

    script = tmp_path / "queries.sql"
    script.write_text("".join(q + ";\n" for q in queries))
    beeline = Path(pyspark.__file__).parent / "bin" / "beeline"
    done = subprocess.run(
        [str(beeline), "-u", jdbc, "--outputformat=tsv2", "--silent=true", "-f", str(script)],
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results: list[list[list[str]]] = []
    for line in done.stdout.split("\n"):
        # in -f mode beeline writes its (null) prompt before each result and erases it with carriage returns
        line = line.rsplit("\r", 1)[-1]
        if line.strip() in ("", "null"):  # the last prompt
            continue
        cells = line.split("\t")
        if cells[0].endswith("at_offset"):  # a header, after the rest of that prompt
            results.append([["at_offset", *cells[1:]]])
        elif results:
            results[-1].append(cells)
    return results


@pytest.mark.slow
def test_connect_and_jdbc_answer_as_in_process_and_the_image(
    spark: Any, small: tuple[Path, Path, list[int]], server: Served, tmp_path: Path
) -> None:
    """The functions answer through Spark Connect and JDBC as they do in this process, and as the image.
    Slow: the module's warehouse (the 125-record log) is ingested and ``kraftlake serve`` started first (a
    subprocess with its own Spark driver, Connect and JDBC servers); then the queries go through a Connect
    client and through beeline, a JVM of its own."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    from udfs.sql import register

    log_dir, warehouse, offsets = small
    queries = [_offsets_query(entity, offsets) for entity in ENTITIES_COMPARED]
    register(spark, warehouse)
    local = [[r.asDict(recursive=True) for r in spark.sql(q).collect()] for q in queries]

    remote = RemoteSession.builder.remote(server.with_token).create()
    try:
        via_connect = [[r.asDict(recursive=True) for r in remote.sql(q).collect()] for q in queries]
    finally:
        remote.stop()

    types = {"at_offset": "INT", "from_offset": "BIGINT"}
    via_jdbc = []
    for entity, result in zip(ENTITIES_COMPARED, _beeline(server.jdbc, queries, tmp_path), strict=True):
        header, *rows = result
        typed = {**types, **dict(history_columns(entity))}
        via_jdbc.append(
            [{c: _jdbc_value(v, typed[c]) for c, v in zip(header, row, strict=True)} for row in rows]
        )

    for entity, here, connect, jdbc in zip(ENTITIES_COMPARED, local, via_connect, via_jdbc, strict=True):
        assert here, entity
        assert _canon(connect) == _canon(here), entity
        assert _canon(jdbc) == _canon(here), entity
        for n in offsets:
            expected = entity_rows(image_at(log_dir, n))[entity]
            got = [
                {k: v for k, v in r.items() if k not in ("at_offset", "from_offset")}
                for r in connect
                if r["at_offset"] == n
            ]
            assert _canon(got) == _canon(expected), (entity, n)


def _local(argv: list[str]) -> tuple[int, str, str]:
    from kraftlake.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_sql_and_state_remote_print_what_local_prints(
    spark: Any, small: tuple[Path, Path, list[int]], server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, warehouse, offsets = small
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    query = (
        f"SELECT topic, `partition`, leader, isr, directories FROM partitions_at({offsets[1]}) "
        "ORDER BY topic, `partition`"
    )
    state = ["state", "--offset", str(offsets[-1]), "--entity", "brokers", "--format", "jsonl"]
    # both remote clients at once (no JVM: Python and gRPC only); the server's warehouse is named in one of
    # them, checked against the one it serves
    by_flag = _cli(
        ["sql", "--remote", server.connect, "--warehouse", str(warehouse), query],
        SPARK_CONNECT_AUTHENTICATE_TOKEN=TOKEN,
    )
    by_env = _cli(state, SPARK_REMOTE=server.with_token)
    remote_sql, remote_state = _finish(by_flag), _finish(by_env)
    local_sql = _local(["sql", "--local", "--warehouse", str(warehouse), query])
    local_state = _local([*state, "--warehouse", str(warehouse)])
    assert local_sql[0] == 0 and local_sql[1].count("\n") > 3, local_sql
    assert local_state[0] == 0 and local_state[1], local_state
    assert remote_sql == local_sql
    assert remote_state == local_state


def test_errors_through_connect_are_one_line(
    spark: Any, small: tuple[Path, Path, list[int]], server: Served, tmp_path: Path
) -> None:
    _, warehouse, _ = small
    negative = "SELECT * FROM partitions_at(-1)"
    runs = {
        "negative": _cli(["sql", "--remote", server.with_token, negative]),
        "no token": _cli(["sql", "--remote", server.connect, "SELECT 1"]),
        "wrong token": _cli(["sql", "--remote", f"{server.connect}/;token=not-{TOKEN}", "SELECT 1"]),
        "127.0.0.1 with a token": _cli(
            ["sql", "--remote", f"sc://127.0.0.1:{server.port}", "SELECT 1"],
            SPARK_CONNECT_AUTHENTICATE_TOKEN=TOKEN,
        ),
        "other warehouse": _cli(
            ["sql", "--remote", server.with_token, "--warehouse", str(tmp_path), "SELECT 1"]
        ),
    }
    got = {name: _finish(proc, 120) for name, proc in runs.items()}
    local = _local(["sql", "--warehouse", str(warehouse), negative])
    assert local == (2, "", "kraftlake sql: error: offset -1 is negative\n")
    assert got["negative"] == local
    for name, text in (
        ("no token", "refused us: No authentication token provided"),
        ("wrong token", "refused us: Invalid authentication token"),
        ("127.0.0.1 with a token", f"name the local endpoint sc://localhost:{server.port}"),
        ("other warehouse", f"serves the warehouse {warehouse.resolve()}, not {tmp_path}"),
    ):
        code, out, err = got[name]
        assert (code, out) == (2, ""), (name, err)
        assert err.startswith("kraftlake sql: error: ") and err.count("\n") == 1 and text in err, (name, err)
        assert TOKEN not in err


def test_serve_refuses_before_starting_spark(
    small: tuple[Path, Path, list[int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, warehouse, _ = small
    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        busy = taken.getsockname()[1]
        for argv, text in (
            (["--host", "0.0.0.0"], "0.0.0.0 is not a loopback address: Spark Connect there needs a token"),
            (
                ["--host", "0.0.0.0", "--token-file", str(token), "--jdbc-port", "0"],
                "the JDBC server has no authentication here",
            ),
            (["--port", str(busy)], f"Spark Connect port {busy} on 127.0.0.1 is in use"),
            (["--port", "0", "--jdbc-port", str(busy)], f"JDBC port {busy} on 127.0.0.1 is in use"),
            (["--token-file", str(tmp_path / "missing")], "cannot read the token file"),
        ):
            code, out, err = _local(["serve", "--warehouse", str(warehouse), *argv])
            assert (code, out) == (2, ""), (argv, err)
            assert err.startswith("kraftlake serve: error: ") and err.count("\n") == 1 and text in err, (
                argv,
                err,
            )
    code, _, err = _local(["serve", "--warehouse", str(tmp_path)])
    assert code == 2 and "holds no kraftlake warehouse" in err
    code, _, err = _local(["sql", "--remote", f"sc://localhost:{busy}", "SELECT 1"])
    assert code == 2 and err.startswith(f"kraftlake sql: error: nothing answers at sc://localhost:{busy}")


@pytest.mark.heavy
def test_record_udfs_through_connect_answer_as_in_process(
    spark: Any, small: tuple[Path, Path, list[int]], server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Connect client's session registers decode_record and kafka_json (Python UDFs live in one session);
    they run in the server's Python workers and answer what they answer in process. Heavy: a Connect session
    of its own and two Python UDF queries in the server (about 20 s); make test keeps the UDFs in process
    (test_udfs) and the server's SQL (this module's other tests)."""
    _, warehouse, _ = small
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    query = (
        "SELECT offset, kafka_json(is_control, api_key, raw) AS js, "
        "decode_record(is_control, api_key, raw).partition_change_record.leader AS leader "
        f"FROM delta.`{warehouse / 'metadata_log'}` ORDER BY offset"
    )
    remote = _finish(_cli(["sql", "--remote", server.with_token, "--format", "jsonl", query]))
    local = _local(["sql", "--warehouse", str(warehouse), "--format", "jsonl", query])
    assert local[0] == 0 and local[1].count("\n") > 3 and "TOPIC_RECORD" in local[1], local
    assert remote == local


def test_sql_uses_the_running_server_of_its_warehouse(
    small: tuple[Path, Path, list[int]], server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelines.endpoint_file import endpoint_path, local_time_zone

    _, warehouse, offsets = small
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)
    record = json.loads(endpoint_path(warehouse).read_text())
    route = record.pop("sql_route")
    assert route.startswith("http://127.0.0.1:") and route.endswith("/sql")
    assert record.pop("time_zone") == local_time_zone()
    assert record == {
        "url": server.connect,
        "host": "localhost",
        "port": server.port,
        "pid": server.proc.pid,
        "token_required": True,
    }
    assert TOKEN not in endpoint_path(warehouse).read_text()
    query = f"SELECT id, fenced FROM brokers_at({offsets[-1]}) ORDER BY id"
    found = _finish(
        _cli(["sql", "--warehouse", str(warehouse), query], SPARK_CONNECT_AUTHENTICATE_TOKEN=TOKEN)
    )
    named = _finish(_cli(["sql", "--remote", server.connect, query], SPARK_CONNECT_AUTHENTICATE_TOKEN=TOKEN))
    assert found[0] == 0 and found[1] == named[1] and found[1].count("\n") > 3, found
    assert found[2] == f"kraftlake sql: on the running `kraftlake serve` at {server.connect} (--local: not)\n"
    # without the token the server wants, and with --local: a local session, no word of the server
    local = _local(["sql", "--warehouse", str(warehouse), query])
    forced = _local(["sql", "--local", "--warehouse", str(warehouse), query])
    assert local == forced == (0, found[1], "")


#: Queries whose output through the SQL route must be Connect's, byte for byte: NULLs, times (an epoch
#: milliseconds column with its time beside it in tables), arrays, structs, maps, bytes, an empty result, the
#: table functions (in both formats), and refusals (one line, exit 2).
ROUTE_QUERIES = (
    "SELECT CAST(NULL AS INT) AS n, 'é' AS s, TIMESTAMP '2026-11-22 07:00:00.250' AS t, "
    "DATE '2026-11-22' AS d, array(1, NULL, 3) AS a, named_struct('x', 1, 'y', CAST(NULL AS STRING)) AS st, "
    "map('k', 1.5D) AS m, X'00FF' AS b, 1700000000123L AS timestamp_ms, true AS f",
    "SELECT * FROM brokers_at({last}) ORDER BY id",
    "SELECT topic, `partition`, isr FROM partitions_at({last}) WHERE false",
    "SELECT * FROM partitions_at(-1)",
    "SELECT * FROM no_such_at(1)",
    "SELEC 1",
)


def test_sql_through_the_route_prints_what_connect_prints(
    small: tuple[Path, Path, list[int]], server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sql --warehouse W`` with a server of W running answers through its SQL route (the client imports no
    pyspark), printing what the same command prints through Connect; a wrong token is refused in one line."""
    _, warehouse, offsets = small
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    monkeypatch.setenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", TOKEN)
    probe = (
        "import sys; from kraftlake.cli import main; code = main(sys.argv[1:]); "
        "print('pyspark' in sys.modules, file=sys.stderr); sys.exit(code)"
    )
    query = f"SELECT id, fenced FROM brokers_at({offsets[-1]}) ORDER BY id"
    alone = subprocess.run(
        [sys.executable, "-c", probe, "sql", "--warehouse", str(warehouse), query],
        cwd=REPO,
        env=command_env(SPARK_CONNECT_AUTHENTICATE_TOKEN=TOKEN),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert alone.returncode == 0 and alone.stdout.count("\n") > 3, alone
    assert alone.stderr.endswith("(--local: not)\nFalse\n"), alone.stderr
    # --remote naming the warehouse's own server goes the same way
    named = subprocess.run(
        [
            sys.executable,
            "-c",
            probe,
            "sql",
            "--remote",
            server.connect,
            "--warehouse",
            str(warehouse),
            query,
        ],
        cwd=REPO,
        env=command_env(SPARK_CONNECT_AUTHENTICATE_TOKEN=TOKEN),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (named.returncode, named.stdout, named.stderr) == (0, alone.stdout, "False\n"), named
    for i, text in enumerate(ROUTE_QUERIES):
        q = text.format(last=offsets[-1])
        for fmt in ("table", "jsonl") if i < 3 else ("table",):
            routed = _local(["sql", "--warehouse", str(warehouse), "--format", fmt, q])
            connect = _local(["sql", "--remote", server.connect, "--format", fmt, q])
            assert routed[2].startswith("kraftlake sql: on the running `kraftlake serve`"), routed
            assert routed[:2] == connect[:2] and routed[2].split("\n", 1)[1] == connect[2], (q, fmt)
            if routed[0] != 0:
                assert routed[2].count("\n") == 2 and "error: " in routed[2], routed
    # the commands' Connect sessions were stopped: none is left for the next code of this process to pick up
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    assert RemoteSession.getActiveSession() is None
    monkeypatch.setenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", "not-" + TOKEN)
    code, out, err = _local(["sql", "--warehouse", str(warehouse), "SELECT 1"])
    assert (code, out) == (2, "") and err.count("\n") == 2, err
    assert "kraftlake sql: error: the SQL route" in err and "answered 401" in err and TOKEN not in err


def test_serve_stops_on_sigterm(server: Served, small: tuple[Path, Path, list[int]]) -> None:
    from pipelines.endpoint_file import endpoint_path

    # the last test of the module: the server goes, and its record with it
    assert endpoint_path(small[1]).is_file()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(120) == 0, server.log.read_text()[-4000:]
    assert not endpoint_path(small[1]).exists()
    assert server.proc.stdout is not None
    assert server.proc.stdout.read().strip() == "stopped (SIGTERM)"
    jdbc_port = int(server.jdbc.rstrip("/").rsplit(":", 1)[1])
    for port in (server.port, jdbc_port):
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
