"""draw(): capture the autograd graph behind tensors as a displayable Graph."""

from __future__ import annotations

from . import _transform
from .capture import capture
from .graph import Graph

__all__ = ["draw", "DEFAULT_MAX_NODES"]

# Above this many nodes the middle of the graph is folded into one node, so that
# layout stays well under a second; pass max_nodes=None to draw everything.
DEFAULT_MAX_NODES = 1000


def draw(roots, *, params=None, depth=None, max_nodes=DEFAULT_MAX_NODES,
         show_saved=False, title=None) -> Graph:
    """Capture the autograd graph that produced ``roots``.

    Args:
        roots: A tensor, or a list, tuple or dict of tensors (dict keys label outputs).
        params: An ``nn.Module`` or a mapping name -> tensor naming the leaves
            (parameters, and inputs you want named).
        depth: Collapse every module at this nesting depth into one node (needs
            module names: pass ``params=model``; op nodes are placed in modules from
            :func:`track_modules` or a live recording).
        max_nodes: Fold the middle of bigger graphs into one node (the picture says
            so); ``None`` draws every node.
        show_saved: List the tensors each node saved for backward; after
            ``backward()`` they show as ``freed``.
        title: A caption drawn above the graph.

    Returns:
        A :class:`Graph`. Legend: grey rounded box = autograd op (``MulBackward0``),
        orange bold = custom ``autograd.Function``, blue = ``nn.Parameter``, yellow = other
        leaf input, green = output, purple 3-D box = collapsed module, dashed note =
        folded nodes; dashed frames group nodes by module. Op nodes show the shape
        (and dtype/device when not float32/cpu) of the tensor they produced.

    Raises:
        TypeError: a root is not a tensor, or ``params`` is of the wrong type.
        ValueError: no roots, a root with no graph, or a bad ``depth``/``max_nodes``.

    Example:
        >>> x = torch.tensor([1.0], requires_grad=True)
        >>> g = dg.draw(2 * x + 1)
        >>> sorted(g.counts().items())
        [('AccumulateGrad', 1), ('AddBackward0', 1), ('MulBackward0', 1)]
    """
    if depth is not None and (not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be an int >= 1 (1 collapses top-level submodules); got {depth!r}")
    if max_nodes is not None and (not isinstance(max_nodes, int) or max_nodes < 2):
        raise ValueError(f"max_nodes must be an int >= 2 or None (draw everything); got {max_nodes!r}")
    nodes, edges, module_types = capture(roots, params=params, show_saved=show_saved)
    if depth is not None:
        nodes, edges = _transform.collapse(nodes, edges, module_types, depth)
    nodes, edges = _transform.fold(nodes, edges, max_nodes)
    return Graph(nodes, edges, module_types, title=title)
