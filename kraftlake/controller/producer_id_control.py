"""``ProducerIdControlManager``: blocks of producer ids for brokers (Kafka's ``ProducerIdControlManager``).

It holds AllocateProducerIds. The next free id comes from the image (replayed records, not a counter of its
own), so a controller that becomes active continues where the log is and no two blocks overlap.
"""

from __future__ import annotations

from kraftlake.controller.brokers import check_broker_epoch
from kraftlake.controller.result import OK, ControllerResult, SimpleResponse
from kraftlake.controller.state import ControllerState
from kraftlake.protocol import messages as m


class ProducerIdControlManager:
    """Producer id blocks."""

    def __init__(self, state: ControllerState) -> None:
        self._state = state

    def handle_allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> ControllerResult[SimpleResponse]:
        """AllocateProducerIds: the next block of ``producer_id_block_size`` ids as a ProducerIdsRecord."""
        img = self._state.image
        err = check_broker_epoch(img, broker_id, broker_epoch)
        if err is not None:
            return ControllerResult((), SimpleResponse(err))
        first = max(img.next_producer_id, 0)
        size = self._state.config.producer_id_block_size
        rec = m.ProducerIdsRecord(
            broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=first + size
        )
        return ControllerResult(
            ((rec, 0),), SimpleResponse(OK, {"producer_id_start": first, "producer_id_len": size})
        )
