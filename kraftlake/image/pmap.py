"""A persistent (immutable, structurally shared) hash map.

The image holds millions of partitions in hundreds of thousands of topics; replaying one record must not copy
the whole topics map. ``PMap`` is a hash array mapped trie (HAMT) with 32-way nodes: ``set`` and ``delete``
copy only the nodes on the path to the key (about log32(n) nodes of at most 32 slots), so two images that
differ by one topic share all other nodes. Kafka uses the same idea (``ImmutableMap`` backed by pcollections,
KAFKA-14735).

Keys must be hashable and compare with ``==``; values are never inspected. Iteration order follows hashes and
is not stable across processes (str hashing is randomized): sort when order matters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeAlias, TypeVar, cast, overload

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

_BITS = 5
_WIDTH = 1 << _BITS
_MASK = _WIDTH - 1


# a leaf holds a key and value of its map's K and V, which the trie's node classes do not carry (they are not
# generic, to keep the nodes plain): Any here, typed again at PMap's methods without a cast per element
class _Leaf:
    __slots__ = ("hash", "key", "value")

    def __init__(self, h: int, key: Any, value: Any) -> None:
        self.hash = h
        self.key = key
        self.value = value


class _Collision:
    """Keys whose full 64-bit hashes are equal."""

    __slots__ = ("hash", "leaves")

    def __init__(self, h: int, leaves: tuple[_Leaf, ...]) -> None:
        self.hash = h
        self.leaves = leaves


class _Node:
    __slots__ = ("slots",)

    def __init__(self, slots: tuple[_Slot, ...]) -> None:
        self.slots = slots


_Slot: TypeAlias = "_Node | _Leaf | _Collision | None"
"""What a slot of a node holds: a subtree, one key, the keys of one full hash, or nothing."""

_EMPTY_NODE: tuple[_Slot, ...] = (None,) * _WIDTH


def _hash(key: object) -> int:
    return hash(key) & 0xFFFFFFFFFFFFFFFF


def _merge_leaves(shift: int, a: _Leaf | _Collision, b: _Leaf) -> _Node | _Collision:
    """A subtree holding ``a`` (a leaf or collision) and the new leaf ``b`` with a different key."""
    if a.hash == b.hash:
        leaves = a.leaves if isinstance(a, _Collision) else (a,)
        return _Collision(a.hash, (*leaves, b))
    ia = (a.hash >> shift) & _MASK
    ib = (b.hash >> shift) & _MASK
    slots = list(_EMPTY_NODE)
    if ia == ib:
        slots[ia] = _merge_leaves(shift + _BITS, a, b)
    else:
        slots[ia] = a
        slots[ib] = b
    return _Node(tuple(slots))


def _set(node: _Node, shift: int, h: int, key: object, value: object) -> tuple[_Node, bool]:
    """Return the new node and whether the key was added (not replaced)."""
    i = (h >> shift) & _MASK
    child = node.slots[i]
    added = False
    if child is None:
        new_child: _Slot = _Leaf(h, key, value)
        added = True
    elif isinstance(child, _Node):
        new_child, added = _set(child, shift + _BITS, h, key, value)
    elif isinstance(child, _Leaf):
        if child.hash == h and (child.key is key or child.key == key):
            if child.value is value:
                return node, False
            new_child = _Leaf(h, key, value)
        else:
            new_child = _merge_leaves(shift + _BITS, child, _Leaf(h, key, value))
            added = True
    else:  # _Collision
        coll = child
        if coll.hash == h:
            leaves = list(coll.leaves)
            for j, leaf in enumerate(leaves):
                if leaf.key == key:
                    leaves[j] = _Leaf(h, key, value)
                    break
            else:
                leaves.append(_Leaf(h, key, value))
                added = True
            new_child = _Collision(h, tuple(leaves))
        else:
            new_child = _merge_leaves(shift + _BITS, coll, _Leaf(h, key, value))
            added = True
    slots = list(node.slots)
    slots[i] = new_child
    return _Node(tuple(slots)), added


def _set_many(node: _Node, shift: int, items: list[tuple[int, object, object]]) -> tuple[_Node, int]:
    """``_set`` of many distinct keys: each node on their paths is copied once, not once per key (a
    controlled shutdown changes a partition in each of 20k topics: one copy of the root, not 20k)."""
    if len(items) == 1:
        h, key, value = items[0]
        new, one = _set(node, shift, h, key, value)
        return new, int(one)
    groups: dict[int, list[tuple[int, object, object]]] = {}
    for item in items:
        i = (item[0] >> shift) & _MASK
        group = groups.get(i)
        if group is None:
            groups[i] = [item]
        else:
            group.append(item)
    slots = list(node.slots)
    added = 0
    for i, group in groups.items():
        child = slots[i]
        if isinstance(child, _Node):
            slots[i], n = _set_many(child, shift + _BITS, group)
            added += n
        else:
            if len(group) == 1:  # the common cases, without a holder node
                h, key, value = group[0]
                if child is None:
                    slots[i] = _Leaf(h, key, value)
                    added += 1
                    continue
                if type(child) is _Leaf and child.hash == h and (child.key is key or child.key == key):
                    slots[i] = _Leaf(h, key, value)
                    continue
            # an empty slot, a leaf or a collision: insert one by one below a node holding only that slot
            sub: list[_Slot] = [None] * _WIDTH
            sub[i] = child
            holder = _Node(tuple(sub))
            for h, key, value in group:
                holder, put = _set(holder, shift, h, key, value)
                added += int(put)
            slots[i] = holder.slots[i]
    return _Node(tuple(slots)), added


def _delete(node: _Node, shift: int, h: int, key: object) -> _Node | None:
    """Return the new node (``None`` if it became empty), or ``node`` itself if the key is absent."""
    i = (h >> shift) & _MASK
    child = node.slots[i]
    if child is None:
        return node
    new_child: _Slot
    if isinstance(child, _Node):
        new_child = _delete(child, shift + _BITS, h, key)
        if new_child is child:
            return node
        if new_child is not None:
            # collapse a node left with a single leaf so that equal maps have comparable shapes
            live = [s for s in new_child.slots if s is not None]
            if len(live) == 1 and not isinstance(live[0], _Node):
                new_child = live[0]
    elif isinstance(child, _Leaf):
        if not (child.hash == h and child.key == key):
            return node
        new_child = None
    else:
        coll = child
        if coll.hash != h:
            return node
        leaves = tuple(leaf for leaf in coll.leaves if leaf.key != key)
        if len(leaves) == len(coll.leaves):
            return node
        new_child = leaves[0] if len(leaves) == 1 else _Collision(h, leaves)
    slots = (*node.slots[:i], new_child, *node.slots[i + 1 :])
    if all(s is None for s in slots):
        return None
    return _Node(slots)


def _iter(node: _Node) -> Iterator[_Leaf]:
    stack: list[_Node | _Leaf | _Collision] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, _Node):
            stack.extend(s for s in n.slots if s is not None)
        elif isinstance(n, _Leaf):
            yield n
        else:
            yield from n.leaves


class PMap(Mapping[K, V], Generic[K, V]):
    """An immutable hash map whose updates return new maps sharing structure with the old one."""

    __slots__ = ("_len", "_root")

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._root: _Node | None = None
        self._len = 0
        if items:
            root = _Node(_EMPTY_NODE)
            n = 0
            for k, v in items.items():
                root, added = _set(root, 0, _hash(k), k, v)
                n += added
            self._root, self._len = root, n

    @classmethod
    def _make(cls, root: _Node | None, length: int) -> PMap[K, V]:
        m: PMap[K, V] = cls.__new__(cls)
        m._root = root
        m._len = length
        return m

    def __len__(self) -> int:
        return self._len

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled as its items: the trie's layout follows hash(), which differs between processes for str keys
        # (a map rebuilt in an executor from the driver's nodes would not find its own keys)
        return (_from_items, (type(self), list(self.items())))

    def __getitem__(self, key: K) -> V:
        # Any: the walk tests ``type(node)`` once into ``t``, which mypy does not narrow ``node`` through
        node: Any = self._root
        if node is None:
            raise KeyError(key)
        h = hash(key) & 0xFFFFFFFFFFFFFFFF
        shift = 0
        while True:
            node = node.slots[(h >> shift) & _MASK]
            if node is None:
                raise KeyError(key)
            t = type(node)
            if t is _Node:
                shift += _BITS
                continue
            if t is _Leaf:
                if node.hash == h and (node.key is key or node.key == key):
                    return cast(V, node.value)
                raise KeyError(key)
            for leaf in node.leaves:
                if leaf.key == key:
                    return cast(V, leaf.value)
            raise KeyError(key)

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, /, default: V) -> V: ...
    @overload
    def get(self, key: K, /, default: T) -> V | T: ...
    def get(self, key: K, default: Any = None) -> Any:
        node: Any = self._root
        if node is None:
            return default
        h = hash(key) & 0xFFFFFFFFFFFFFFFF
        shift = 0
        while True:
            node = node.slots[(h >> shift) & _MASK]
            if node is None:
                return default
            t = type(node)
            if t is _Node:
                shift += _BITS
                continue
            if t is _Leaf:
                if node.hash == h and (node.key is key or node.key == key):
                    return node.value
                return default
            for leaf in node.leaves:
                if leaf.key == key:
                    return leaf.value
            return default

    def __contains__(self, key: object) -> bool:
        try:
            self[cast(K, key)]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[K]:
        if self._root is None:
            return iter(())
        return (leaf.key for leaf in _iter(self._root))

    def items(self) -> Iterator[tuple[K, V]]:  # type: ignore[override]
        if self._root is None:
            return iter(())
        return ((leaf.key, leaf.value) for leaf in _iter(self._root))

    def values(self) -> Iterator[V]:  # type: ignore[override]
        if self._root is None:
            return iter(())
        return (leaf.value for leaf in _iter(self._root))

    def set(self, key: K, value: V) -> PMap[K, V]:
        """Return a map with ``key`` bound to ``value``."""
        root = self._root if self._root is not None else _Node(_EMPTY_NODE)
        new_root, added = _set(root, 0, _hash(key), key, value)
        if new_root is root and self._root is not None:
            return self
        return PMap._make(new_root, self._len + added)

    def set_many(self, items: Mapping[K, V]) -> PMap[K, V]:
        """Return a map with every key of ``items`` bound to its value (as repeated ``set``, faster)."""
        if len(items) < 8:
            m = self
            for k, v in items.items():
                m = m.set(k, v)
            return m
        root = self._root if self._root is not None else _Node(_EMPTY_NODE)
        new_root, added = _set_many(root, 0, [(_hash(k), k, v) for k, v in items.items()])
        return PMap._make(new_root, self._len + added)

    def delete(self, key: K) -> PMap[K, V]:
        """Return a map without ``key`` (the same map if it is absent)."""
        if self._root is None:
            return self
        new_root = _delete(self._root, 0, _hash(key), key)
        if new_root is self._root:
            return self
        return PMap._make(new_root, self._len - 1)

    def update(self, changes: Mapping[K, V | None], removed: Callable[[V | None], bool]) -> PMap[K, V]:
        """Apply many changes: keys whose value satisfies ``removed`` are deleted, others are set."""
        m = self
        for k, v in changes.items():
            m = m.delete(k) if removed(v) else m.set(k, cast(V, v))
        return m

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Mapping) or len(self) != len(other):
            return False
        sentinel = object()
        return all(other.get(k, sentinel) == v for k, v in self.items())

    def __hash__(self) -> int:  # pragma: no cover - maps are not used as keys
        raise TypeError("PMap is not hashable")

    def __repr__(self) -> str:
        return f"PMap({dict(self.items())!r})"


def _from_items(cls: type[PMap[Any, Any]], items: list[tuple[Any, Any]]) -> PMap[Any, Any]:
    """A map unpickled: built again from its items with this process's hashes."""
    return cls(dict(items))
