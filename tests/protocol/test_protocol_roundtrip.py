"""Property tests: random records of every type and version survive encode -> decode unchanged."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from record_strategies import CASES, SPECS, struct_strategy
from sweeps import sweep

from kraftlake.protocol.codec import decode_body, encode_body
from kraftlake.protocol.control import ControlRecordType, decode_control_body, encode_control_body
from kraftlake.protocol.messages import MESSAGE_CLASSES
from kraftlake.protocol.spec import MessageSpec
from kraftlake.records.serde import decode_metadata_record, encode_metadata_record


@pytest.mark.parametrize(("spec", "version"), CASES, ids=[f"{s.name}-v{v}" for s, v in CASES])
@settings(max_examples=sweep(60, 20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_body_round_trip(spec: MessageSpec, version: int, data: st.DataObject) -> None:
    record = data.draw(struct_strategy(spec.struct, version))
    body = encode_body(record, version)
    assert decode_body(spec, version, body) == record
    if spec.kind == "metadata":
        value = encode_metadata_record(record, version)
        assert decode_metadata_record(value) == (record, version)
    elif version == 0:
        ctype = ControlRecordType(spec.control_type)
        assert decode_control_body(ctype, encode_control_body(record)) == record


def test_every_message_has_a_class() -> None:
    assert set(MESSAGE_CLASSES) == {s.name for s in SPECS}
    metadata = [s for s in SPECS if s.kind == "metadata"]
    control = [s for s in SPECS if s.kind == "control"]
    assert len(metadata) == 27 and len(control) == 5
