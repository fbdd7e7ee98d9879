"""``FeatureControlManager``: the finalized features (Kafka's ``FeatureControlManager``).

It holds what the log says about features: the bootstrap records a new log starts with (metadata.version
first), UpdateFeatures, and the two answers the other managers read from them: the ``metadata.version``
that decides which records and versions they write, and whether eligible leader replicas (KIP-966) are on.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftlake.controller.config import ELR_FEATURE, METADATA_VERSION, MV_4_0_IV1, SUPPORTED_FEATURES
from kraftlake.controller.requests import FeatureUpdate, UpgradeType
from kraftlake.controller.result import (
    OK,
    ApiError,
    ControllerResult,
    Errors,
    RecordAndVersion,
    SimpleResponse,
)
from kraftlake.controller.state import ControllerState
from kraftlake.image import MetadataImage
from kraftlake.protocol import messages as m


class FeatureControlManager:
    """Finalized features: bootstrap, UpdateFeatures, metadata.version and ELR."""

    def __init__(self, state: ControllerState) -> None:
        self._state = state

    def metadata_version(self) -> int:
        """The finalized metadata.version, or the configured one before the bootstrap records."""
        mv = self._state.image.metadata_version
        return mv if mv is not None else self._state.config.metadata_version

    def elr_enabled(self) -> bool:
        """Whether eligible leader replicas are on: the ELR feature finalized at a metadata.version with them."""
        return self._state.image.features.get(ELR_FEATURE, 0) >= 1 and self.metadata_version() >= MV_4_0_IV1

    def bootstrap_result(self) -> ControllerResult[None]:
        """metadata.version first, then the other finalized features (Kafka's bootstrap metadata)."""
        config = self._state.config
        records: list[RecordAndVersion] = [
            (m.FeatureLevelRecord(name=METADATA_VERSION, feature_level=config.metadata_version), 0)
        ]
        for name in sorted(config.features):
            if config.features[name] > 0:
                records.append((m.FeatureLevelRecord(name=name, feature_level=config.features[name]), 0))
        return ControllerResult(tuple(records), None)

    def handle_update_features(self, updates: Sequence[FeatureUpdate]) -> ControllerResult[SimpleResponse]:
        """UpdateFeatures: FeatureLevelRecords; any invalid update fails the request (INVALID_UPDATE_VERSION)."""
        img = self._state.image
        records: list[RecordAndVersion] = []
        out: dict[str, ApiError] = {}
        for u in updates:
            err = _check_feature(img, u)
            out[u.name] = err or OK
            if err is None:
                records.append((m.FeatureLevelRecord(name=u.name, feature_level=u.max_version_level), 0))
                if (
                    u.name == ELR_FEATURE
                    and u.max_version_level == 0
                    and img.features.get(ELR_FEATURE, 0) > 0
                ):
                    records.append((m.ClearElrRecord(topic_name=""), 0))
        if any(not e.ok for e in out.values()):
            return ControllerResult(
                (), SimpleResponse(ApiError(Errors.INVALID_UPDATE_VERSION), {"features": out})
            )
        return ControllerResult(tuple(records), SimpleResponse(OK, {"features": out}))


def _check_feature(img: MetadataImage, u: FeatureUpdate) -> ApiError | None:
    supported = SUPPORTED_FEATURES.get(u.name)
    if supported is None or u.name == "kraft.version":
        return ApiError(
            Errors.INVALID_UPDATE_VERSION, f"The controller does not support the feature {u.name}"
        )
    current = img.features.get(u.name, 0)
    level = u.max_version_level
    if u.name == METADATA_VERSION and level < 1:
        return ApiError(Errors.INVALID_UPDATE_VERSION, "metadata.version cannot be removed")
    if level > supported[1]:
        return ApiError(
            Errors.INVALID_UPDATE_VERSION, f"{u.name} level {level} is above the supported {supported[1]}"
        )
    for b in img.brokers.values():
        ranges = dict(b.supported_features)
        r = ranges.get(u.name)
        if level > 0 and (r is None or not r.min <= level <= r.max):
            return ApiError(
                Errors.INVALID_UPDATE_VERSION, f"broker {b.id} does not support {u.name} level {level}"
            )
    if level < current:
        if u.upgrade_type == UpgradeType.UPGRADE:
            return ApiError(
                Errors.INVALID_UPDATE_VERSION,
                "Can't downgrade the version of this feature without setting the upgrade type "
                "to either safe or unsafe downgrade.",
            )
        if u.name == METADATA_VERSION:
            return ApiError(Errors.INVALID_UPDATE_VERSION, "Unsupported metadata.version downgrade")
    return None
