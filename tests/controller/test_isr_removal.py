"""The fast path for removing a broker from ISRs (``isr_removal``) builds what ``PartitionChangeBuilder`` builds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sweeps import sweep

from kraftlake.controller.partition_change import UNDECIDED, PartitionChangeBuilder, isr_removal
from kraftlake.image.model import MIGRATING_DIR, NO_LEADER, PartitionRegistration

BROKERS = range(6)


@st.composite
def partitions(draw: st.DrawFn) -> PartitionRegistration:
    replicas = tuple(draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True)))
    isr = tuple(r for r in replicas if draw(st.booleans()))
    rest = [r for r in replicas if r not in isr]
    elr = tuple(r for r in rest if draw(st.booleans()))
    lke = tuple(r for r in rest if r not in elr and draw(st.booleans()))
    leader = draw(st.sampled_from((NO_LEADER, *replicas)))
    adding = tuple(r for r in replicas if draw(st.integers(0, 5)) == 0)
    removing = tuple(r for r in replicas if r not in adding and draw(st.integers(0, 5)) == 0)
    return PartitionRegistration(
        replicas,
        (MIGRATING_DIR,) * len(replicas),
        isr,
        removing,
        adding,
        leader,
        draw(st.sampled_from((0, 1))),
        draw(st.integers(0, 9)),
        draw(st.integers(0, 9)),
        elr,
        lke,
    )


@settings(max_examples=sweep(800, 200), deadline=None)
@given(
    p=partitions(),
    broker=st.sampled_from(BROKERS),
    unacceptable=st.sets(st.sampled_from(BROKERS)),
    mv=st.sampled_from((7, 11, 12, 17, 23, 30)),
    min_isr=st.integers(1, 3),
    elr=st.booleans(),
)
def test_isr_removal_equals_the_builder(
    p: PartitionRegistration, broker: int, unacceptable: set[int], mv: int, min_isr: int, elr: bool
) -> None:
    def acceptable(b: int) -> bool:
        return b != broker and b not in unacceptable

    fast = isr_removal(p, "AAAAAAAAAAAAAAAAAAAAAQ", 7, broker, acceptable, mv, min_isr, elr)
    expected = (
        PartitionChangeBuilder(p, "AAAAAAAAAAAAAAAAAAAAAQ", 7, acceptable, mv, min_isr, elr_enabled=elr)
        .set_target_isr(tuple(r for r in p.isr if r != broker))
        .build()
    )
    if fast is UNDECIDED:
        assert (
            p.adding_replicas
            or p.removing_replicas
            or len([r for r in p.isr if r != broker]) < (min_isr if elr else 1)
        )
    else:
        assert fast == expected


def test_isr_removal_decides_the_common_shape() -> None:
    p = PartitionRegistration((1, 2, 3), (MIGRATING_DIR,) * 3, (1, 2, 3), (), (), 1, 0, 4, 9, (), ())
    rec = isr_removal(p, "AAAAAAAAAAAAAAAAAAAAAQ", 0, 1, lambda b: b != 1, 30, 1, True)
    assert rec is not UNDECIDED and rec is not None
    record, version = rec  # type: ignore[misc]
    assert (record.isr, record.leader, version) == ((2, 3), 2, 2)
