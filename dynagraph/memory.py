"""What the autograd graph keeps alive: the bytes each node saved for backward.

The records (:class:`SavedMemory`, :class:`SavedTensor`) and the text a picture shows
of them live here, with no torch import; :mod:`dynagraph._measure` reads them from
autograd's nodes (``draw(memory=True)``, ``live(memory=True)``).

Every autograd node keeps the tensors its backward needs (``MulBackward0`` both of
its inputs, ``ReluBackward0`` its output) until ``backward()`` frees them. This module
reads them, as autograd holds them, without unpacking, copying or moving any data:

- each *storage* counts once: a tensor saved by three nodes, or a view of another
  saved tensor, is one allocation (keyed by device and data pointer, weighing the
  whole storage's bytes);
- storages of *parameters and inputs* (leaves, and tensors made without grad) live
  anyway and are counted apart from *activations*, which exist only because the
  graph keeps them;
- under ``torch.autograd.graph.saved_tensors_hooks`` what is counted is the packed
  object autograd keeps: a tensor (a CPU or half-precision copy) weighs its storage,
  tensors in a tuple or list each count, anything else weighs nothing;
- a non-reentrant ``torch.utils.checkpoint`` region's nodes keep placeholders
  (recomputed in backward) and the region keeps its inputs, counted once; a
  reentrant one is its own ``CheckpointFunctionBackward`` node keeping its inputs;
- after ``backward()`` the saved tensors are gone: they show as ``freed``;
- each saved tensor keeps its dtype (:meth:`SavedMemory.by_dtype`); where a graph saves
  a floating-point tensor that is not float32 (``torch.autocast``, a pack hook that
  halves), the title adds the bytes by dtype and each node's hover details list its
  saved tensors with their dtypes;
- a tensor weighs what it holds: its storage; a sparse tensor its indices (and row or
  column pointers) and values; a tensor subclass that wraps others (a jagged nested
  tensor: values and offsets) what it wraps. A ``meta`` tensor weighs its size as if
  it were real, and storages at data pointer 0 (meta, empty) are told apart by the
  storage itself, never merged by that pointer;
- an in-place op on a view (``base[:5].mul_(w)``, ``Dropout(inplace=True)`` after
  ``flatten``) is a ``CopySlices`` node that keeps the op's node inside it, which
  torch shows on no attribute. dynagraph reads what that node saved by starting a
  compiled-autograd backward of the ``CopySlices`` node alone and stopping it before
  anything runs (:func:`dynagraph._torch.lifted_saved`). Under ``saved_tensors_hooks`` that backward
  does not show the packed values, so there they are not counted; the summary says
  so where other saved tensors of the graph were packed (a graph with no other hooked
  tensor gives no sign of it).

Three edges of the rule: a Python number that autograd wraps into a 0-dim tensor (the
``2`` in ``x * 2``) is kept by its node and counted with the inputs (8 bytes), though
``saved_tensors_hooks`` never sees it; and a hooked tensor is an activation unless its
storage is a leaf's of this graph (a hook that returns a data batch as it is counts
the batch as an activation); and while dynagraph reads a ``CopySlices`` node (some
100 µs), a ``backward()`` in another thread would fail (torch keeps one compiled-autograd
setting for all threads).

Example:
    >>> x = torch.ones(1000, requires_grad=True)
    >>> h = x.exp()                        # 4,000 bytes, saved by exp and by both uses
    >>> dg.draw((h * h).sum(), memory=True).memory.total
    4000
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ._language import language, tr

__all__ = ["FREED_TEXT", "RECOMPUTED", "UNREAD", "SavedMemory", "SavedTensor", "StorageKey", "decorate",
           "fmt_bytes", "mixed", "node_fill", "running_totals"]

StorageKey = tuple[str, int]  # (device, data pointer; the storage's own address at pointer 0)

# Fill colours of op nodes by their share of the graph's saved bytes (white canvas,
# black text stays readable on each); nodes that save nothing keep their grey.
SHARE_FILLS = ((0.40, "#ff8787"), (0.15, "#ffa94d"), (0.05, "#ffd8a8"), (0.0, "#fff4e6"))
RECOMPUTED_FILL = "#e3fafc"  # nodes of a non-reentrant checkpoint region: they keep nothing
FREED_TEXT = "freed"
HOVER_LINES = 8  # saved tensors listed in a node's hover details (then how many more)
RECOMPUTED = "recomputed in backward (checkpoint)"
UNREAD = "in-place op on a view: nothing it saved could be read"
_note = operator.attrgetter("note")
_FLOATING = ("float", "bfloat")  # how the names of torch's floating-point dtypes start


@dataclass(frozen=True, slots=True)  # slots: one record per saved tensor
class SavedTensor:
    """One tensor a node saved for backward, as its storage.

    Attributes:
        name: The saved attribute (``self``, ``result``, ``tensors[0]``, ``checkpoint input 0``).
        storage: ``(device, data pointer)`` of its storage, ``None`` when it holds none
            (freed, or a packed object that is not a tensor).
        nbytes: Bytes of that whole storage (0 without one).
        leaf: Whether the tensor is a parameter or input (autograd did not compute it).
        note: ``freed``, ``packed: float16 cpu`` (by saved_tensors_hooks), ``recomputed
            in backward (checkpoint)``, or empty.
        dtype: The saved tensor's dtype without ``torch.`` (``bfloat16``; a sparse
            tensor's indices ``int64``), empty without a storage.
    """

    name: str
    storage: StorageKey | None
    nbytes: int
    leaf: bool
    note: str = ""
    dtype: str = ""


@dataclass
class SavedMemory:
    """The saved tensors of every node of a graph, by node id, and their totals.

    Attributes:
        saved: ``{node id: [SavedTensor, ...]}`` (nodes that saved nothing are absent).
        leaves: Storages of the graph's leaves (they live anyway, saved or not).
    """

    saved: dict[int, list[SavedTensor]] = field(default_factory=dict)
    leaves: set[StorageKey] = field(default_factory=set)

    def storages(self, ids: Iterable[int] | None = None) -> dict[StorageKey, tuple[int, bool]]:
        """``{storage: (bytes, is a leaf)}`` of the storages saved by ``ids`` (all nodes by default)."""
        out: dict[StorageKey, tuple[int, bool]] = {}
        for nid in self.saved if ids is None else ids:
            for s in self.saved.get(nid, ()):
                if s.storage is not None:
                    _count(out, s.storage, s.nbytes, s.leaf or s.storage in self.leaves)
        return out

    def bytes_of(self, ids: Iterable[int] | None = None) -> tuple[int, int]:
        """``(activation bytes, parameter and input bytes)`` saved by ``ids``, each storage once."""
        return _split(self.storages(ids))

    def by_dtype(self, ids: Iterable[int] | None = None) -> dict[str, int]:
        """``{dtype: bytes}`` saved by ``ids`` (all nodes by default), each storage once at
        its largest size, under the dtype of the first tensor that holds it; sorted by name.

        Example (under ``torch.autocast("cpu", dtype=torch.bfloat16)`` a Linear saves its
        input and weight in bfloat16): ``{'bfloat16': 1536, 'float32': 1024}``.
        """
        sizes: dict[StorageKey, tuple[int, str]] = {}
        for nid in self.saved if ids is None else ids:
            for s in self.saved.get(nid, ()):
                if s.storage is not None:
                    was = sizes.get(s.storage)
                    sizes[s.storage] = (s.nbytes, s.dtype) if was is None else (max(was[0], s.nbytes), was[1])
        out: dict[str, int] = {}
        for nbytes, dtype in sizes.values():
            out[dtype] = out.get(dtype, 0) + nbytes
        return dict(sorted(out.items()))

    def dtype_line(self) -> str:
        """``by dtype: bfloat16 1.5 KB, float32 1.0 KB`` where the graph saves a
        floating-point tensor that is not float32 (mixed precision, a pack hook that
        halves); else empty: a float32 graph is drawn as before."""
        dtypes = {s.dtype for lst in self.saved.values() for s in lst}
        return _dtype_line(self.by_dtype()) if mixed(dtypes) else ""

    def dtype_notes(self, mapping: Mapping[int, int]) -> dict[int, str]:
        """Hover lines of each drawn node in a mixed-precision graph (see :meth:`dtype_line`):
        what the first node it stands for saved, one line per tensor with its dtype and
        bytes (``{drawn id: text}``; ``mapping``: ``{original id: drawn id}``); else empty."""
        if not self.dtype_line():
            return {}
        out: dict[int, str] = {}
        for nid, lst in self.saved.items():
            new = mapping.get(nid, nid)
            kept = [s for s in lst if s.storage is not None]
            if new in out or not kept:
                continue
            lines = [tr("saved {name}: {dtype}, {size}", name=s.name, dtype=s.dtype, size=fmt_bytes(s.nbytes))
                     for s in kept[:HOVER_LINES]]
            if len(kept) > HOVER_LINES:
                lines.append(tr("\u2026 and {n} more saved tensors", n=len(kept) - HOVER_LINES))
            out[new] = "\n".join(lines)
        return out

    @property
    def total(self) -> int:
        """Bytes the graph keeps alive for backward: every saved storage, once."""
        return sum(self.bytes_of())

    @property
    def activations(self) -> int:
        """Bytes of saved storages that exist only because the graph keeps them."""
        return self.bytes_of()[0]

    @property
    def parameters_and_inputs(self) -> int:
        """Bytes of saved storages of leaves (parameters, inputs): alive anyway."""
        return self.bytes_of()[1]

    @property
    def freed(self) -> bool:
        """Whether backward() released what the nodes saved (some freed, none held)."""
        entries = [s for lst in self.saved.values() for s in lst]
        return any(s.note == FREED_TEXT for s in entries) and not any(s.storage for s in entries)

    def summary(self, split: tuple[int, int] | None = None) -> str:
        """``keeps 41.2 MB alive for backward (40.1 MB activations, 1.1 MB parameters and
        inputs)``, or that backward() freed it (``split``: :meth:`bytes_of`, when known)."""
        notes = {s.note for lst in self.saved.values() for s in lst}  # one pass: 300,000 nodes
        line = self.dtype_line()
        return self._summary(self.bytes_of() if split is None else split, notes, self.freed) + \
            (tr("; {summary}", summary=line) if line else "")

    def _summary(self, split: tuple[int, int], notes: set[str], freed: bool) -> str:
        """:meth:`summary` from what a scan of every saved tensor found: the split, the
        notes, and whether backward() freed them."""
        if freed:
            return tr("saved tensors freed by backward(): the graph keeps nothing alive")
        act, leaf = split
        again = sum(map(self.recomputed, self.saved)) if RECOMPUTED in notes else 0
        unread = len(self.unread()) if any(n.startswith("packed:") for n in notes) else 0
        more = ((tr("; {n} checkpointed nodes recomputed in backward", n=f"{again:,}") if again else "")
                + (tr("; not counted: what {n} in-place ops on views saved under saved_tensors_hooks",
                      n=f"{unread:,}") if unread else ""))
        return tr("keeps {total} alive for backward ({act} activations, {leaf} parameters and inputs{more})",
                  total=fmt_bytes(act + leaf), act=fmt_bytes(act), leaf=fmt_bytes(leaf), more=more)

    def unread(self) -> list[int]:
        """Ids of the ``CopySlices`` nodes (in-place ops on views) whose saved tensors could
        not be read, in a graph drawn under ``saved_tensors_hooks`` (torch does not show
        the packed values of a wrapped op; without hooks such a node saved nothing)."""
        if not any(s.note.startswith("packed:") for lst in self.saved.values() for s in lst):
            return []
        return [nid for nid, lst in self.saved.items() if any(s.note == UNREAD for s in lst)]

    def recomputed(self, nid: int) -> bool:
        """Whether node ``nid`` is in a non-reentrant checkpoint region (it keeps
        placeholders; backward runs the region again)."""
        return RECOMPUTED in map(_note, self.saved.get(nid, ()))  # (any ==, in C: a rolled node has 300,000)

    def remap(self, mapping: Mapping[int, int]) -> SavedMemory:
        """The same saved tensors by new node ids (``{old id: new id}``; merged nodes'
        lists are joined, ids missing from ``mapping`` keep their id)."""
        saved: dict[int, list[SavedTensor]] = {}
        for nid, lst in self.saved.items():
            saved.setdefault(mapping.get(nid, nid), []).extend(lst)
        return SavedMemory(saved, set(self.leaves))

    def subset(self, ids: set[int]) -> SavedMemory:
        """Only the nodes in ``ids`` (the graph of a recording's first steps)."""
        return SavedMemory({i: v for i, v in self.saved.items() if i in ids}, set(self.leaves))

    def node_text(self, nid: int, repeats: int | None = None, split: tuple[int, int] | None = None) -> str:
        """The line drawn in node ``nid``: ``saves 1.2 MB`` (``+ 4 KB params/inputs``),
        ``saved: freed``, or empty when it saved nothing (``split``: ``bytes_of([nid])``,
        when known)."""
        entries = self.saved.get(nid, [])
        if not entries:
            return ""
        # Drawn by Graphviz, which has no Chinese glyphs: in Chinese these are words-free
        # (dynagraph/_zh.py's DRAWN_BY_GRAPHVIZ), and the summary line explains them.
        if all(s.note == FREED_TEXT for s in entries):
            return tr("saved: freed")
        if self.recomputed(nid):  # inside a non-reentrant checkpoint: its inputs are in the title
            return tr("keeps nothing: recomputed in backward")
        if all(s.note == UNREAD for s in entries):
            return "saved: not readable (hooks)" if nid in self.unread() else ""
        act, leaf = self.bytes_of([nid]) if split is None else split
        if not act:
            text = tr("saves {leaf} of params/inputs", leaf=fmt_bytes(leaf))
        elif leaf:
            text = tr("saves {act} + {leaf} params/inputs", act=fmt_bytes(act), leaf=fmt_bytes(leaf))
        else:
            text = tr("saves {act}", act=fmt_bytes(act))
        return text + (tr(" (all \u00d7{n} iterations)", n=f"{repeats:,}") if repeats else "")


def mixed(dtypes: Iterable[str]) -> bool:
    """Whether saved tensors of these dtypes (names, ``""`` for none) include a
    floating-point dtype other than float32 (told by name: torch names each of its
    floating-point dtypes ``float...`` or ``bfloat16``, and no other; the tests check it).

    Example:
        >>> mixed(["float32", "int64"]), mixed(["bfloat16", "float32"])
        (False, True)
    """
    return any(d != "float32" and d.startswith(_FLOATING) for d in dtypes)


def _dtype_line(sizes: Mapping[str, int]) -> str:
    sep = tr(", ")  # between the items of a list (Chinese: the enumeration comma)
    return tr("by dtype: {sizes}", sizes=sep.join(f"{d} {fmt_bytes(n)}" for d, n in sizes.items()))


def fmt_bytes(n: int) -> str:
    """``512 B``, ``4.0 KB``, ``41.2 MB``, ``1.5 GB`` (powers of 1000, as on a disk)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def node_fill(share: float) -> str:
    """Fill colour of a node holding ``share`` (0-1) of the graph's saved bytes."""
    return next(colour for low, colour in SHARE_FILLS if share >= low)


def running_totals(memory: SavedMemory, steps: list[list[int]]) -> list[int]:
    """Bytes kept alive after each step (``steps``: the node ids each step created),
    each storage counted once, the first time a node saves it."""
    seen: set[StorageKey] = set()
    saved = memory.saved
    total, out = 0, []
    for ids in steps:  # (memory.storages(ids) per step, inlined: a 300,000-step recording)
        if len(ids) == 1:  # most steps make one node, which saves one storage or none
            lst = saved.get(ids[0], ())
            if len(lst) <= 1:
                for s in lst:
                    key = s.storage
                    if key is not None and key not in seen:
                        seen.add(key)
                        total += s.nbytes
                out.append(total)
                continue
        new: dict[StorageKey, int] = {}  # storages first saved in this step: their largest size
        for nid in ids:
            for s in saved.get(nid, ()):
                if s.storage is not None and s.storage not in seen and s.nbytes > new.get(s.storage, -1):
                    new[s.storage] = s.nbytes
        seen.update(new)
        total += sum(new.values())
        out.append(total)
    return out


def decorate(memory: SavedMemory, mapping: Mapping[int, int],
             repeats: Mapping[int, int]) -> tuple[dict[int, str], dict[int, str], str]:
    """What a picture shows of ``memory``: each drawn node's saved bytes and share
    colour, and the graph's total.

    Args:
        mapping: ``{original id: drawn id}`` (the picture's roll and fold).
        repeats: ``{drawn id: iterations}`` for nodes drawn once for a rolled loop
            (their bytes are summed over all iterations, and say so).

    Returns:
        ``(notes, fills, line)``: ``{drawn id: text}`` and ``{drawn id: fill colour}``,
        in drawn-node order, and the summary line for the title.
    """
    drawn, per_node, notes, dtypes, kept = _gather(memory, mapping)
    split = _split(_merged(per_node.values()))
    notes_of, fills = _node_notes(drawn, per_node, repeats, RECOMPUTED in notes, max(sum(split), 1))
    freed = FREED_TEXT in notes and not kept
    return notes_of, fills, _title_line(memory, split, notes, dtypes, freed)


def _gather(memory: SavedMemory, mapping: Mapping[int, int]) -> tuple[
        SavedMemory, dict[int, dict[StorageKey, tuple[int, bool]]], set[str], set[str], bool]:
    """One pass over every saved tensor (a rolled recording of 300,000 steps has as many
    nodes): ``(drawn, per_node, notes, dtypes, kept)``, the drawn nodes' lists, the
    storages of each drawn node (each storage once, its largest size), the notes and
    dtypes seen, and whether any tensor is kept."""
    drawn = SavedMemory({}, set(memory.leaves))
    per_node: dict[int, dict[StorageKey, tuple[int, bool]]] = {}
    notes: set[str] = set()
    dtypes: set[str] = set()
    kept = False
    leaves, lists, drawn_id = memory.leaves, drawn.saved, mapping.get
    for nid, lst in memory.saved.items():
        new = drawn_id(nid, nid)
        mine = per_node.get(new)
        if mine is None:  # (a new drawn node: most are one of a rolled loop's)
            mine = per_node[new] = {}
            lists[new] = []
        lists[new].extend(lst)
        for s in lst:
            notes.add(s.note)
            dtypes.add(s.dtype)
            key = s.storage
            if key is None:
                continue
            kept = True
            own = s.leaf or key in leaves  # a leaf's storage
            if key in mine:
                _count(mine, key, s.nbytes, own)
            else:  # (a storage seen first: what _count writes)
                mine[key] = (s.nbytes, own)
    return drawn, per_node, notes, dtypes, kept


def _merged(per_node: Iterable[dict[StorageKey, tuple[int, bool]]]) -> dict[StorageKey, tuple[int, bool]]:
    """The storages of the whole graph, from those of each drawn node (each storage once)."""
    everything: dict[StorageKey, tuple[int, bool]] = {}
    for mine in per_node:  # drawn nodes rarely share a storage: merge whole dicts
        if everything.keys().isdisjoint(mine.keys()):
            everything.update(mine)
        else:
            for key, (nbytes, own) in mine.items():
                _count(everything, key, nbytes, own)
    return everything


def _node_notes(drawn: SavedMemory, per_node: Mapping[int, dict[StorageKey, tuple[int, bool]]],
                repeats: Mapping[int, int], recomputed: bool,
                total: int) -> tuple[dict[int, str], dict[int, str]]:
    """``({drawn id: text}, {drawn id: fill colour})`` in drawn-node order; a node's fill
    is its share of ``total`` bytes, or the recomputed colour (``recomputed``: some
    tensor was recomputed in backward)."""
    notes_of: dict[int, str] = {}
    fills: dict[int, str] = {}
    for nid in drawn.saved:
        act, leaf = _split(per_node[nid])
        text = drawn.node_text(nid, repeats.get(nid), (act, leaf))
        if not text:
            continue
        notes_of[nid] = text
        if recomputed and drawn.recomputed(nid):
            fills[nid] = RECOMPUTED_FILL
        elif act + leaf:
            fills[nid] = node_fill((act + leaf) / total)
    return notes_of, fills


def _title_line(memory: SavedMemory, split: tuple[int, int], notes: set[str], dtypes: set[str],
                freed: bool) -> str:
    """The picture's summary line of ``memory`` (its split on a second line), with the
    legend of the nodes' numbers in Chinese and a line per dtype where they are mixed."""
    line = memory._summary(split, notes, freed)
    if language() == "en":
        line = line.replace(" (", "\n(", 1)  # the split on a second line
    else:  # drawn outside Graphviz (_page, _png): the split on a second line, and what the nodes' numbers are
        legend = ("" if freed else tr("In a node: the bytes it saved for backward (after +: parameters "
                                      "and inputs; 0 B (checkpoint): recomputed in backward)")
                  if RECOMPUTED in notes else
                  tr("In a node: the bytes it saved for backward (after +: parameters and inputs)"))
        line = line.replace("\uff08", "\n\uff08", 1) + (f"\n{legend}" if legend else "")
    if mixed(dtypes) and not freed:
        line += "\n" + _dtype_line(memory.by_dtype())
    return line


def _count(found: dict[StorageKey, tuple[int, bool]], key: StorageKey, nbytes: int, leaf: bool) -> None:
    """Count a saved tensor of storage ``key`` in ``found``: each storage once, at its
    largest size, a leaf's if any tensor of it is."""
    was = found.get(key)
    found[key] = (nbytes, leaf) if was is None else (max(was[0], nbytes), was[1] or leaf)


def _split(storages: Mapping[StorageKey, tuple[int, bool]]) -> tuple[int, int]:
    """``(activation bytes, parameter and input bytes)`` of ``{storage: (bytes, is a leaf)}``."""
    act = leaf = 0
    for nbytes, is_leaf in storages.values():
        if is_leaf:
            leaf += nbytes
        else:
            act += nbytes
    return act, leaf
