"""Where a warehouse can be: a local directory. A URI (``s3://bucket/wh``) is refused by the argument parser,
before a command writes anything: taken as a path it would become a local folder named after it (``s3:/...``)."""

from __future__ import annotations

import argparse
import re

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")


def warehouse_argument(text: str) -> str:
    """``--warehouse``'s value as given, or the parser's error (exit 2) for a URI: kraftlake's warehouses are
    local directories."""
    found = _SCHEME.match(text)
    if found is not None:
        raise argparse.ArgumentTypeError(
            f"{text}: {found['scheme']}:// warehouses are not supported (a warehouse is a local directory); "
            "nothing was written"
        )
    return text
