"""draw(): capture the autograd graph behind tensors as a displayable Graph."""

from __future__ import annotations

import warnings

from ._args import integer_or_same
from ._picture import MAX_NODES, check_policy, check_title
from .capture import Params, Roots, capture
from .graph import Graph
from .memory import SavedMemory

__all__ = ["draw"]


def draw(roots: Roots, *, params: Params = None, depth: int | None = None,
         max_nodes: int | None = MAX_NODES, roll: str | bool = "auto",
         show_saved: bool = False, title: str | None = None, memory: bool = False,
         overview: bool | None = None) -> Graph:
    """Capture the autograd graph that produced ``roots``.

    Args:
        roots: A tensor, or a list, tuple or dict of tensors (dict keys label outputs).
        params: An ``nn.Module`` or a mapping name -> tensor naming the leaves
            (parameters, and inputs you want named).
        depth: Collapse every module at this nesting depth into one node (needs
            module names: pass ``params=model``; op nodes are placed in modules from
            :func:`track_modules` or a live recording).
        max_nodes: The picture folds the middle of bigger graphs (after rolling)
            into one node, and says so; ``None`` draws every node. The graph's
            records (``nodes``, ``counts()``) always hold every node.
        roll: ``"auto"`` draws repeated structure (loop iterations, identical
            layers) once, labelled ``×N``, in graphs over 40 nodes; ``True`` always,
            ``False`` never.
        show_saved: List the tensors each node saved for backward; after
            ``backward()`` they show as ``freed``.
        title: A caption drawn above the graph.
        memory: Show what the graph keeps alive for backward: each op node's saved
            bytes (``saves 1.2 MB``, coloured by its share: pale to red), the total
            in the title (``keeps 41.2 MB alive for backward``), each storage counted
            once, parameters and inputs apart from activations; ``freed`` after
            ``backward()``. A rolled node sums all its iterations. Nodes of a
            non-reentrant ``torch.utils.checkpoint`` region are pale cyan: they keep
            nothing and are recomputed in backward (the region's inputs are in the
            total). Under ``saved_tensors_hooks`` the packed tensors are counted.
            The numbers are in ``graph.memory`` (a
            :class:`dynagraph.memory.SavedMemory`).
        overview: Draw modules as boxes, a click in the live view opening a box's ops
            (needs module tags: :func:`track_modules`). ``None`` (the default) does so
            where the picture of every op would fill over three screens at 1:1, under
            the default ``roll`` and ``max_nodes``; ``True`` wherever ops carry module
            tags; ``False`` never (every op, rolled and folded as above).

    Returns:
        A :class:`Graph`. Legend: grey rounded box = autograd op (``MulBackward0``),
        orange bold = custom ``autograd.Function``, blue = ``nn.Parameter``, yellow = other
        leaf input, green = output, purple 3-D box = collapsed module, dashed note =
        folded nodes; dashed frames group nodes by module; a yellow frame titled
        ``×N`` is one iteration drawn for N, its dashed orange edges carrying state
        to the next iteration. Inside :func:`track_passes`, a node made by a backward pass
        (``create_graph=True``) is outlined in that pass's colour (purple: first backward,
        teal: second, orange: third and later), named in the title. Op nodes show the shape
        (and dtype/device when not float32/cpu) of the tensor they produced.

    Warns:
        UserWarning: ``depth`` collapsed nothing (no module tags: see
            :func:`track_modules`).

    Raises:
        TypeError: a root is not a tensor, ``params`` is of the wrong type,
            ``title`` is not a string, or ``memory`` or ``show_saved`` is not a bool.
        ValueError: no roots, a root with no graph, or a bad ``depth``/``max_nodes``/``overview``.

    Example:
        >>> x = torch.tensor([1.0], requires_grad=True)
        >>> g = dg.draw(2 * x + 1)
        >>> sorted(g.counts().items())
        [('AccumulateGrad', 1), ('AddBackward0', 1), ('MulBackward0', 1)]
    """
    depth, max_nodes = integer_or_same(depth), integer_or_same(max_nodes)  # (np.int64(2): 2)
    check_policy(roll, max_nodes, depth, overview)  # before the walk: fail at once
    check_title(title)
    if not isinstance(memory, bool):
        raise TypeError(f"memory must be True or False; got {type(memory).__name__}")
    if not isinstance(show_saved, bool):  # a truthy "False" would list them
        raise TypeError(f"show_saved must be True or False; got {show_saved!r} ({type(show_saved).__name__})")
    saved = SavedMemory() if memory else None
    nodes, edges, module_types = capture(roots, params=params, show_saved=show_saved, memory=saved)
    graph = Graph(nodes, edges, module_types, title=title, roll=roll, max_nodes=max_nodes,
                  overview=overview)
    graph.memory = saved
    if depth is not None:
        graph, merged = graph.collapsed(depth)
        if not merged:
            warnings.warn(_NOTHING_COLLAPSED.format(depth=depth), stacklevel=2)
    return graph


_NOTHING_COLLAPSED = (
    "draw(..., depth={depth}) collapsed nothing: no op in this graph is tagged with the "
    "module that made it, or no module is that deep. Run the forward pass inside "
    "`with dg.track_modules(model):` (or a `dg.live(model)` recording) and pass "
    "params=model, or use a smaller depth.")
