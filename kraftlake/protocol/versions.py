"""Kafka's version ranges as written in message specs: ``"0+"``, ``"1-3"``, ``"2"``, ``"none"``."""

from __future__ import annotations

from dataclasses import dataclass

# Kafka's Versions use a short; an open range ends at its maximum.
_OPEN_END = 0x7FFF


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive range of versions; ``lowest > highest`` is the empty range ("none")."""

    lowest: int
    highest: int

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        """Parse Kafka's notation; ``None`` and ``"none"`` give the empty range."""
        if text is None or text.strip() == "none":
            return NONE
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), _OPEN_END)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lowest <= version <= self.highest

    @property
    def empty(self) -> bool:
        return self.lowest > self.highest

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.highest == _OPEN_END:
            return f"{self.lowest}+"
        if self.lowest == self.highest:
            return str(self.lowest)
        return f"{self.lowest}-{self.highest}"


NONE = Versions(1, 0)
