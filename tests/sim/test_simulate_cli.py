"""`kraftlake simulate`: both ways of appending write logs that replay to the same kind of cluster."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from kraftlake.cli import main
from kraftlake.image import image_at
from kraftlake.sim.cluster import check_image

ARGS = [
    "simulate",
    "--brokers",
    "4",
    "--topics",
    "3",
    "--partitions-per-topic",
    "2",
    "--events",
    "120",
    "--seed",
    "3",
    "--no-progress",
]


def _run(argv: list[str]) -> str:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        assert main(argv) == 0
    return out.getvalue()


@pytest.mark.parametrize("through", ["local", "quorum"])
def test_simulate_writes_a_log_that_replays(tmp_path: Path, through: str) -> None:
    text = _run(
        [*ARGS, "--data-dir", str(tmp_path), "--through", through, "--no-fsync"]
        if through == "quorum"
        else [*ARGS, "--data-dir", str(tmp_path), "--through", through]
    )
    assert "events: 120 (" in text
    log_dirs = [tmp_path] if through == "local" else sorted(tmp_path.glob("node-*"))
    assert len(log_dirs) == (1 if through == "local" else 3)
    images = [image_at(d) for d in log_dirs]
    for image in images:
        assert len(image.brokers) == 4
        check_image(image, elr_enabled=True)
    # every voter holds the same committed log, so their images at a common offset agree
    common = min(i.provenance.offset for i in images)
    first = image_at(log_dirs[0], common)
    assert all(image_at(d, common) == first for d in log_dirs[1:])


def test_weights_override_the_scaled_defaults(tmp_path: Path) -> None:
    text = _run(
        [
            *ARGS,
            "--data-dir",
            str(tmp_path),
            "--through",
            "local",
            "--events",
            "400",
            "--weights",
            "crash=0,controlled_shutdown=0,rolling_restart=0,config_change=40",
        ]
    )
    counts = dict(kv.split("=") for kv in text.split("events: 400 (")[1].split(")")[0].split(", "))
    assert "crash" not in counts and "controlled_shutdown" not in counts
    assert int(counts["config_change"]) > 100  # 40 of about 150 weight
    assert "event weights: isr_shrink=25, isr_expand=35, crash=0," in text
    with pytest.raises(SystemExit), redirect_stderr(io.StringIO()):
        main([*ARGS, "--data-dir", str(tmp_path / "x"), "--weights", "crash=-1"])


def test_large_clusters_get_rare_broker_events() -> None:
    from kraftlake.sim.cluster import DEFAULT_WEIGHTS, scaled_weights

    assert scaled_weights(5, 30, 3) == DEFAULT_WEIGHTS
    big = scaled_weights(100, 2_000_000, 3)  # 60,000 replicas a broker
    assert big["crash"] == pytest.approx(DEFAULT_WEIGHTS["crash"] * (100 / 60_000) ** 1.5)
    assert big["create_topic"] == pytest.approx(DEFAULT_WEIGHTS["create_topic"] / 200)
    assert (
        big["isr_shrink"] == DEFAULT_WEIGHTS["isr_shrink"]
        and big["config_change"] == DEFAULT_WEIGHTS["config_change"]
    )


def test_the_in_process_quorum_gets_a_fetch_timeout_for_the_cluster_size() -> None:
    from kraftlake.sim.quorum_cluster import default_fetch_timeout_ms

    assert default_fetch_timeout_ms(5, 30, 3) == 2000  # Kafka's default for small clusters
    assert default_fetch_timeout_ms(100, 2_000_000, 3) == 10_000  # 60k replicas a broker
