"""The record of a running ``kraftlake serve`` (``pipelines.endpoint_file``): trusted only while its process
lives and its port answers, and only by a client that has the token the server wants."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.endpoint_file import (
    endpoint_path,
    record_endpoint,
    remove_endpoint,
    running_endpoint,
    running_record,
)


def test_a_live_listener_is_found_a_stale_record_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)
    assert running_endpoint(tmp_path) is None  # no record
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        url = f"sc://127.0.0.1:{port}"
        record_endpoint(tmp_path, url, "127.0.0.1", port, token_required=False)
        assert running_endpoint(tmp_path) == url
        # a server that wants a token: only a client holding one uses it
        record_endpoint(tmp_path, url, "127.0.0.1", port, token_required=True)
        assert running_endpoint(tmp_path) is None
        monkeypatch.setenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", "t")
        assert running_endpoint(tmp_path) == url
        # a process that is gone: its record is stale
        dead = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
        )
        record_endpoint(tmp_path, url, "127.0.0.1", port, token_required=False, pid=int(dead.stdout))
        assert running_endpoint(tmp_path) is None
        record_endpoint(tmp_path, url, "127.0.0.1", port, token_required=False)
    assert running_endpoint(tmp_path) is None  # the port closed
    # removed by its own process only
    remove_endpoint(tmp_path, pid=1)
    assert endpoint_path(tmp_path).is_file()
    remove_endpoint(tmp_path)
    assert not endpoint_path(tmp_path).exists()
    endpoint_path(tmp_path).parent.mkdir(exist_ok=True)
    endpoint_path(tmp_path).write_text('{"url": "sc://x:1", "ho')  # cut short: not a record
    assert running_endpoint(tmp_path) is None


def test_the_client_registers_the_record_udfs_only_for_a_query_naming_one() -> None:
    from pipelines.record_udf_names import RECORD_UDFS, calls_record_udfs
    from udfs.records import UDFS

    assert tuple(UDFS) == RECORD_UDFS
    assert calls_record_udfs("SELECT decode_record(value) FROM metadata_log")
    assert calls_record_udfs("select KAFKA_JSON (value) from metadata_log")
    assert not calls_record_udfs("SELECT count(*) FROM partitions_at(5)")
    assert not calls_record_udfs("SELECT my_kafka_json_x FROM t")


def test_reading_the_record_imports_nothing_of_the_server() -> None:
    probe = "import sys, pipelines.endpoint_file; print(sorted(m for m in sys.modules if m.startswith(('kraftlake.service', 'pyspark', 'pipelines.serve'))))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_the_sql_route_is_given_to_a_client_in_the_servers_time_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)
    route = "http://127.0.0.1:9/sql"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        url = f"sc://127.0.0.1:{port}"
        record_endpoint(tmp_path, url, "127.0.0.1", port, token_required=False)
        found = running_record(tmp_path)
        assert found is not None and (found.url, found.sql_route) == (url, None)
        record_endpoint(tmp_path, url, "127.0.0.1", port, token_required=False, sql_route=route)
        found = running_record(tmp_path)
        assert found is not None and (found.url, found.sql_route) == (url, route)
        # a server printing times in another zone than this process's: Connect, where ours applies
        doc = json.loads(endpoint_path(tmp_path).read_text())
        endpoint_path(tmp_path).write_text(json.dumps(dict(doc, time_zone=doc["time_zone"] + "x")))
        found = running_record(tmp_path)
        assert found is not None and (found.url, found.sql_route) == (url, None)
