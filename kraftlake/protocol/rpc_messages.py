"""The RPC message and header classes by name: ``rpc_messages.FetchRequest``, ``rpc_messages.VoteResponse``.

Each class and its codecs are built from ``schemas/rpc`` the first time it is asked for (as
:func:`kraftlake.protocol.rpc.message_class` does); ``rpc_messages.pyi`` declares them for type checkers.
"""

from __future__ import annotations

from kraftlake.protocol import rpc
from kraftlake.protocol.codegen import Record
from kraftlake.protocol.spec import load_rpcs


def __getattr__(name: str) -> type[Record]:
    if name in load_rpcs():
        cls: type[Record] = rpc.message_class(name)
        return cls
    raise AttributeError(f"module {__name__!r} has no RPC message class {name!r}")
