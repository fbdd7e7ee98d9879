"""``PMap.set_many`` agrees with repeated ``set`` (and with a dict), collisions and deep tries included; a map
pickled in one process is whole in another (other ``str`` hashes)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from sweeps import sweep

from kraftlake.image.pmap import PMap


class Colliding:
    """A key whose hash collides with other keys on purpose."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        return self.n % 3

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Colliding) and other.n == self.n

    def __repr__(self) -> str:
        return f"C{self.n}"


keys = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=4), st.integers(0, 50).map(Colliding))


@settings(max_examples=sweep(300, 75), deadline=None)
@given(
    base=st.dictionaries(keys, st.integers(), max_size=300),
    changes=st.dictionaries(keys, st.integers(), max_size=300),
)
def test_set_many_equals_repeated_set(base: dict, changes: dict) -> None:
    m: PMap = PMap()
    for k, v in base.items():
        m = m.set(k, v)
    one = m
    for k, v in changes.items():
        one = one.set(k, v)
    many = m.set_many(changes)
    expected = {**base, **changes}
    assert dict(many.items()) == expected == dict(one.items())
    assert len(many) == len(expected)
    assert all(many[k] == v for k, v in expected.items())
    assert dict(m.items()) == base  # the old map is untouched


def test_set_many_on_a_large_map() -> None:
    m: PMap = PMap()
    for i in range(20_000):
        m = m.set(f"topic-{i}", i)
    changed = m.set_many({f"topic-{i}": -i for i in range(0, 40_000, 3)})
    assert len(changed) == 20_000 + len(range(20_001, 40_000, 3))
    assert all(changed[f"topic-{i}"] == (-i if i % 3 == 0 else i) for i in range(20_000))
    assert m["topic-3"] == 3


def test_a_pickled_map_finds_its_keys_in_a_process_with_other_str_hashes(tmp_path: Path) -> None:
    """A map travels pickled to a Spark executor, whose ``str`` hashes differ: it is rebuilt there."""
    import os
    import pickle
    import subprocess
    import sys

    m = PMap({f"topic-{i}": i for i in range(500)}).set(("t", 3), "tuple key")
    blob = tmp_path / "map.pickle"
    blob.write_bytes(pickle.dumps(m, pickle.HIGHEST_PROTOCOL))
    check = (
        "import pickle, sys\n"
        f"m = pickle.loads(open({str(blob)!r}, 'rb').read())\n"
        "assert len(m) == 501 and m[('t', 3)] == 'tuple key'\n"
        "assert all(m[f'topic-{i}'] == i for i in range(500)), 'a key is lost'\n"
        "assert m.set('topic-7', 0)['topic-7'] == 0 and len(m.delete('topic-8')) == 500\n"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
