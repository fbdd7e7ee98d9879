"""A small etcd-style data-driven runner: blocks of ``command`` / ``----`` / expected output / blank line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def parse(text: str) -> list[tuple[str, str]]:
    """The (command, expected output) pairs of a script; '#' lines between blocks are comments."""
    blocks: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            i += 1
            continue
        command = line.strip()
        i += 1
        if i >= len(lines) or lines[i] != "----":
            raise ValueError(f"line {i + 1}: expected '----' after {command!r}")
        i += 1
        out = []
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        blocks.append((command, "\n".join(out)))
    return blocks


def run_file(path: Path, run: Callable[[str], str], rewrite: bool) -> list[str]:
    """Run a script; returns mismatches, or rewrites the expected outputs in place when `rewrite`."""
    blocks = parse(path.read_text())
    mismatches = []
    rendered = []
    for command, expected in blocks:
        actual = run(command)
        rendered.append(f"{command}\n----\n{actual}\n")
        if actual != expected:
            mismatches.append(f"{path.name}: {command}\n--- expected\n{expected}\n--- actual\n{actual}")
    if rewrite:
        # keep the comments that precede each block
        comments: list[list[str]] = []
        current: list[str] = []
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("#"):
                current.append(lines[i])
                i += 1
            elif lines[i].strip() and i + 1 < len(lines) and lines[i + 1] == "----":
                comments.append(current)
                current = []
                i += 2
                while i < len(lines) and lines[i].strip():
                    i += 1
            else:
                i += 1
        parts = []
        for block, comment in zip(rendered, comments, strict=True):
            parts.append(("\n".join(comment) + "\n" if comment else "") + block)
        path.write_text("\n".join(parts))
        return []
    return mismatches
