"""Match the nodes of two graphs by structure: what the second adds to the first."""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ._records import Node

__all__ = ["Unplaced", "added"]

Key = Hashable
Records = tuple[Sequence[Node], Sequence[tuple[int, int]]]  # a graph's nodes and edges
Sig = tuple[Key, tuple[object, ...]]
_PAIRS_SCORED = 4096  # a tie class bigger than this (in pairs) is paired in creation order


class Unplaced(NamedTuple):
    """New nodes of one name that the structure cannot tell from changed ones.

    Attributes:
        name: Their autograd name.
        new: How many of ``candidates`` are new (the rest stand for changed nodes).
        candidates: Ids of the nodes of ``b`` among which they are.
    """

    name: str
    new: int
    candidates: tuple[int, ...]


@dataclass
class _Side:
    """One graph as the matcher reads it, by node id."""

    key: dict[int, Key]  # what must agree for two nodes to match (name, leaf name, module)
    ins: dict[int, list[int]]  # the nodes each node reads, in edge order
    outs: dict[int, list[tuple[int, int]]]  # (consumer, input slot) of each edge out
    rank: dict[int, int]  # creation order: ties go to the earliest
    fwd: dict[int, int]  # hash of the node and all it is computed from


def _side(nodes: Sequence[Node], edges: Sequence[tuple[int, int]], key: Callable[[Node], Key]) -> _Side:
    """Read ``nodes`` and ``edges`` (producer -> consumer) into a :class:`_Side`."""
    ins: dict[int, list[int]] = {n.id: [] for n in nodes}
    outs: dict[int, list[tuple[int, int]]] = {n.id: [] for n in nodes}
    for src, dst in edges:
        outs[src].append((dst, len(ins[dst])))
        ins[dst].append(src)
    keys = {n.id: key(n) for n in nodes}
    order = sorted(nodes, key=lambda n: (n.seq is not None, n.seq or 0, n.id))
    rank = {n.id: i for i, n in enumerate(order)}
    fwd: dict[int, int] = {}
    for i in _topological(ins, outs):
        fwd[i] = hash((keys[i], tuple(fwd[p] for p in ins[i])))
    return _Side(keys, ins, outs, rank, fwd)


def _topological(ins: dict[int, list[int]], outs: dict[int, list[tuple[int, int]]]) -> list[int]:
    """Node ids, each after every node it reads (Kahn's algorithm)."""
    waiting = {i: len(p) for i, p in ins.items()}
    ready = deque(i for i, k in waiting.items() if k == 0)
    order: list[int] = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for c, _ in outs[i]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    return order


class _Matching:
    """Pairs of nodes of ``b`` and ``a`` that stand for the same computation."""

    def __init__(self, a: _Side, b: _Side, forward_first: bool = True) -> None:
        self.a, self.b = a, b
        self.first = 0 if forward_first else 1  # index in run()'s todo
        self.ba: dict[int, int] = {}  # b id -> a id
        self.ab: dict[int, int] = {}

    def run(self) -> _Matching:
        """Match from the leaves forwards as far as it goes, then pairs that only some
        matched neighbours vouch for (the old layer's parameters vouch for its op,
        before a new twin is matched from the outputs), then one step from the
        outputs backwards, and again from what that matched, until nothing more
        matches (or backwards first); then vouched-for pairs, and again. Returns
        this matching."""
        todo = [(set(self.b.key), set(self.a.key)), (set(self.b.key), set(self.a.key))]
        fresh = True  # pairs made the first way since the vouched-for ones were last sought
        while True:
            while todo[0][0] or todo[1][0]:
                if fresh and not todo[self.first][0]:  # before turning: what those pairs vouch for
                    pairs = self._relaxed(sole=True)
                    fresh = bool(pairs)
                    self._after(pairs, todo)
                    continue
                way = self.first if todo[self.first][0] else 1 - self.first
                pairs = self._step(way == 0, *todo[way])
                fresh = fresh or (way == self.first and bool(pairs))
                todo[way] = (set(), set())
                self._after(pairs, todo)
            pairs = self._relaxed()
            if not pairs:
                return self
            self._after(pairs, todo)

    def _after(self, pairs: Iterable[tuple[int, int]], todo: list[tuple[set[int], set[int]]]) -> None:
        """Record ``pairs`` and note the nodes they may make ready in either direction."""
        for u, v in pairs:
            self.ba[u], self.ab[v] = v, u
            todo[0][0].update(c for c, _ in self.b.outs[u])
            todo[0][1].update(c for c, _ in self.a.outs[v])
            todo[1][0].update(self.b.ins[u])
            todo[1][1].update(self.a.ins[v])

    def _sig(self, side: _Side, i: int, forward: bool, to: dict[int, int] | None) -> Sig | None:
        """What a node's match must share with it: its key and its matched inputs
        (forward) or consumers (backward), as ids of ``a``; ``None`` until all are matched."""
        if forward:
            near: list = [p if to is None else to.get(p) for p in side.ins[i]]
            return None if None in near else (side.key[i], tuple(near))
        outs = [(c if to is None else to.get(c), s) for c, s in side.outs[i]]
        if any(c is None for c, _ in outs):
            return None
        return side.key[i], tuple(sorted(outs))

    def _step(self, forward: bool, bs: set[int], as_: set[int]) -> list[tuple[int, int]]:
        """Match the ready nodes among ``bs`` and ``as_``, class by class (same signature)."""
        classes: dict[Sig, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
        for u in bs:
            sig = None if u in self.ba else self._sig(self.b, u, forward, self.ba)
            if sig is not None:
                classes[sig][0].append(u)
        pairs: list[tuple[int, int]] = []
        for v in as_:
            sig = None if v in self.ab else self._sig(self.a, v, forward, None)
            if sig is not None and sig in classes:
                classes[sig][1].append(v)
        for us, vs in classes.values():
            if vs:
                pairs += self._assign(us, vs, forward)
        return pairs

    def _assign(self, us: list[int], vs: list[int], forward: bool) -> list[tuple[int, int]]:
        """Pair alike nodes of ``b`` (``us``) and ``a`` (``vs``): first those whose
        neighbours on the unmatched side look most alike, then in creation order (so
        that of interchangeable repeats, a loop's steps, the latest are left new)."""
        if len(us) == len(vs) == 1:
            return [(us[0], vs[0])]
        a, b = self.a, self.b
        us, vs = sorted(us, key=b.rank.__getitem__), sorted(vs, key=a.rank.__getitem__)
        if len(us) * len(vs) > _PAIRS_SCORED:  # (a long loop's thousands of steps: in order)
            return list(zip(us, vs, strict=False))
        look_a = {v: self._looks(a, v, forward) for v in vs}
        look_b = {u: self._looks(b, u, forward) for u in us}
        alike = {(i, j): sum((look_b[u] & look_a[v]).values())
                 for i, u in enumerate(us) for j, v in enumerate(vs)}
        pairs, taken_u, taken_v = [], set(), set()
        for i, j in sorted(alike, key=lambda ij: (-alike[ij], ij)):
            if i not in taken_u and j not in taken_v:
                pairs.append((us[i], vs[j]))
                taken_u.add(i)
                taken_v.add(j)
        return pairs

    @staticmethod
    def _looks(side: _Side, i: int, forward: bool) -> Counter[object]:
        """The neighbours of ``i`` on the side not yet matched: its consumers with
        their other inputs (forward), or its inputs (backward)."""
        if not forward:
            return Counter(side.fwd[p] for p in side.ins[i])
        return Counter((side.key[c], tuple(sorted(side.fwd[p] for p in side.ins[c] if p != i)))
                       for c, _ in side.outs[i])

    def unexplained(self) -> set[int]:
        """Nodes of ``b`` around each matched pair ``(u, v)`` whose inputs do not agree
        slot by slot: ``u`` and ``v`` read as many inputs, the same node in the same
        slots; where ``u`` reads a match, ``v`` reads its partner; where ``u`` reads a
        node without one, ``v``'s input is matched to a node that ``u`` reads across
        unmatched nodes alone (inserted between). Returns ``u``, what it reads so, the
        matches of ``v``'s inputs and, for a slot that disagrees, the nodes between."""
        region: set[int] = set()
        for u, v in self.ba.items():
            ins_u, ins_v = self.b.ins[u], self.a.ins[v]
            reached: set[int] = set()
            agree = _repeats(ins_u) == _repeats(ins_v)  # (x * x reads one node twice: so must its match)
            for p, q in zip(ins_u, ins_v, strict=False):
                across = {p} if p in self.ba else self._through(p)
                reached |= across
                if self.ba.get(p, q) != q or (q in self.ab and self.ab[q] not in across):
                    agree = False
                    region |= _between(self.b, self.ab[q], p) if q in self.ab else {p}
            if not agree:
                region |= {u, *reached, *(self.ab[q] for q in ins_v if q in self.ab)}
                region |= {p for p in ins_u if p not in self.ba}
        return region

    def _through(self, p: int) -> set[int]:
        """The matched nodes that unmatched node ``p`` reads directly or across
        unmatched nodes alone (the new nodes ``p`` ends are inserted after them)."""
        reached: set[int] = set()
        seen = {p}
        todo = list(self.b.ins[p])
        while todo:
            i = todo.pop()
            if i in self.ba:
                reached.add(i)
            elif i not in seen:
                seen.add(i)
                todo.extend(self.b.ins[i])
        return reached

    def _relaxed(self, sole: bool = False) -> list[tuple[int, int]]:
        """Pairs of unmatched nodes of one key that agree on the most matched neighbours,
        each the other's one best (``sole``: see :meth:`_votes`)."""
        votes = self._votes(sole)
        best_u: dict[int, list[tuple[int, int]]] = defaultdict(list)
        best_v: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for (u, v), n in votes.items():
            best_u[u].append((n, v))
            best_v[v].append((n, u))
        pairs = []
        for u, options in best_u.items():
            best = _only_best(options)
            if best is not None and _only_best(best_v[best]) == u:
                pairs.append((u, best))
        return pairs

    def _votes(self, sole: bool) -> Counter[tuple[int, int]]:
        """For each unmatched pair of one key: how many matched neighbours agree on it
        (when ``sole``, only inputs with one such consumer vote: a loop's weight, read
        by every step, would vote for every pair of steps)."""
        a, b = self.a, self.b
        votes: Counter[tuple[int, int]] = Counter()
        for u in b.key:
            if u in self.ba:
                continue
            for slot, p in enumerate(b.ins[u]):  # through a matched input: its consumers in a
                near = [c for c, s in a.outs.get(self.ba.get(p, -1), ())
                        if s == slot and c not in self.ab and a.key[c] == b.key[u]]
                if not sole or len(near) == 1:
                    votes.update((u, c) for c in near)
            for c, s in b.outs[u]:  # through a matched consumer: its input in a
                ins = a.ins.get(self.ba.get(c, -1), [])
                if s < len(ins) and ins[s] not in self.ab and a.key[ins[s]] == b.key[u]:
                    votes[u, ins[s]] += 1
        return votes


def _between(side: _Side, first: int, last: int) -> set[int]:
    """``first``, ``last`` and the nodes computed from ``first`` that ``last`` is computed from."""
    after: set[int] = set()
    todo = [first]
    while todo:
        i = todo.pop()
        for c, _ in side.outs[i]:
            if c not in after:
                after.add(c)
                todo.append(c)
    before = {last}
    todo = [last]
    while todo:
        for p in side.ins[todo.pop()]:
            if p in after and p not in before:
                before.add(p)
                todo.append(p)
    return before | {first}


def _repeats(ins: list[int]) -> list[int]:
    """For each input slot, the first slot that reads the same node: ``[0, 0]`` for ``x * x``."""
    return [ins.index(i) for i in ins]


def _only_best(options: list[tuple[int, int]]) -> int | None:
    """The node of the one highest vote in ``(votes, node)`` pairs, or ``None`` on a tie."""
    options.sort(reverse=True)
    if len(options) > 1 and options[1][0] == options[0][0]:
        return None
    return options[0][1]


_NEVER_NEW = ("output", "fold", "module")  # what the table does not count is never lit


def added(a: Records, b: Records, key: Callable[[Node], Key]) -> tuple[list[int], list[Unplaced]]:
    """The nodes of ``b`` with no counterpart in ``a``, matched by structure.

    Two nodes match when their ``key`` agrees and so do the matches of their inputs
    (found from the leaves forwards) or of their consumers (from the outputs
    backwards); then, of what is left, two nodes of one key that agree on more
    matched neighbours than any other. Among interchangeable repeats (a loop's
    iterations) the latest created are left new. Where that leaves new nodes it
    cannot place, matching from the outputs backwards first is tried too, and the
    answer that places more is kept.

    Args:
        a, b: Each ``(nodes, edges)`` of a graph, edges from producer to consumer.
        key: What must agree for two nodes to match (name, leaf name, module).

    Returns:
        ``(new, unplaced)``: the sorted ids of ``b``'s new nodes, and for each key
        whose unmatched nodes in ``b`` outnumber but do not stand alone against
        those of ``a``, an :class:`Unplaced` (neither the new nor the changed ones
        can be told apart; none of them is in ``new``).
    """
    sa, sb = _side(*a, key), _side(*b, key)
    nodes = {n.id: n for n in b[0]}
    counted = {i for i, n in nodes.items() if n.kind not in _NEVER_NEW}
    new, unplaced = _place(_Matching(sa, sb).run(), counted)
    if unplaced:  # from the outputs backwards first, it may place them all
        other = _place(_Matching(sa, sb, forward_first=False).run(), counted)
        if sum(n for n, _ in other[1].values()) < sum(n for n, _ in unplaced.values()):
            new, unplaced = other
    groups = [Unplaced(nodes[min(us)].name, count, tuple(sorted(us))) for count, us in unplaced.values()]
    return sorted(new), sorted(groups, key=lambda g: g.candidates)


def _with_new_next_to(region: set[int], new: set[int], side: _Side) -> set[int]:
    """``region`` and the new nodes joined to it by edges across new nodes alone."""
    todo = list(region)
    while todo:
        i = todo.pop()
        for j in [*side.ins[i], *(c for c, _ in side.outs[i])]:
            if j in new and j not in region:
                region.add(j)
                todo.append(j)
    return region


def _place(matching: _Matching, counted: set[int]) -> tuple[set[int], dict[Key, tuple[int, set[int]]]]:
    """The new nodes among ``counted`` (ids of ``b``), and by key those that cannot be
    placed: ``(how many are new, candidates)``. Unmatched nodes of a key that ``a`` also
    has unmatched nodes of cannot be told from changed ones; nor can new nodes of a key
    that some node has around a matched pair whose inputs in ``a`` the new nodes do not
    explain (a misplaced match: the new node may be that one), or next to nodes that
    cannot be placed (which of them is old decides which of its neighbours is), and that
    once more from the nodes so marked."""
    sa, sb = matching.a, matching.b
    left_a = Counter(sa.key[v] for v in sa.key if v not in matching.ab)
    left_b: dict[Key, set[int]] = defaultdict(set)
    for u in counted - matching.ba.keys():
        left_b[sb.key[u]].add(u)
    new: set[int] = set()
    unplaced: dict[Key, tuple[int, set[int]]] = {}
    for k, us in left_b.items():
        if not left_a[k]:
            new |= us
        elif len(us) > left_a[k]:
            unplaced[k] = (len(us) - left_a[k], us)
    unexplained, moved = matching.unexplained(), set[int]()
    for _ in range(2):  # (the nodes a first round moves make their neighbours doubtful: once more)
        unsure = {i for _, us in unplaced.values() for i in us}  # and what they read or feed:
        # which of those is old hangs on which of these is
        unsure |= {j for i in unsure for j in [*sb.ins[i], *(c for c, _ in sb.outs[i])]}
        region = _with_new_next_to(unexplained | unsure, new, sb) & counted
        doubtful = {sb.key[i] for i in region}  # a match of this key there may be the new node
        more = {u for u in new - moved if sb.key[u] in doubtful}
        for u in sorted(more):
            count, candidates = unplaced.get(sb.key[u], (0, set()))
            unplaced[sb.key[u]] = (count + 1, candidates | {u})
        moved |= more
        grown = False
        for k in {sb.key[u] for u in moved}:  # its matches there are candidates too
            count, candidates = unplaced[k]
            wider = candidates | {i for i in region if sb.key[i] == k}
            grown |= wider != candidates
            unplaced[k] = (count, wider)
        if not (more or grown):
            break
    placed = {k for k, (count, candidates) in unplaced.items() if count == len(candidates)}  # (all new)
    return (new - moved).union(*(unplaced.pop(k)[1] for k in placed)), unplaced
