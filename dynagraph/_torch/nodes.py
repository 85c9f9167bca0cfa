"""What an autograd node tells about itself: its kind, its forward output's shape, its
creation counter and metadata dict, and the node a tensor's gradient flows into."""

from __future__ import annotations

from typing import Any

import torch

from . import features

__all__ = ["GradFn", "custom_name", "gradient_edge_node", "is_custom", "metadata", "output_meta",
           "sequence_nr", "shape_of", "shapes_of"]

GradFn = torch.autograd.graph.Node  # for annotations: an autograd node (a grad_fn or AccumulateGrad)


def is_custom(fn: GradFn) -> bool:
    """Whether ``fn`` is the backward node of a custom ``autograd.Function``."""
    cls = getattr(torch.autograd.function, features.BACKWARD_CLASS, None)
    if cls is not None:
        return isinstance(fn, cls)
    features.missing("BackwardCFunction")
    return hasattr(fn, features.FORWARD_CLS)


def custom_name(fn: GradFn) -> str:
    """The user's ``Function`` class name (``Square``), or the node's name less ``Backward``."""
    forward_cls = getattr(fn, features.FORWARD_CLS, None)
    if forward_cls is not None:
        return forward_cls.__name__
    features.missing("_forward_cls")
    return type(fn).__name__.removesuffix("Backward")


def output_meta(fn: GradFn) -> tuple[tuple[int, ...] | None, torch.dtype, torch.device] | None:
    """``(shape, dtype, device)`` of the node's first forward output, or ``None`` if unknown.

    Unlike saved tensors this survives ``backward()``.
    """
    try:
        meta = getattr(fn, features.INPUT_METADATA)
    except AttributeError:
        features.missing("_input_metadata")
        return None
    except RuntimeError:  # a node kind that keeps none
        return None
    if not meta:
        return None
    first = meta[0]
    try:
        return tuple(first.shape), first.dtype, first.device
    except RuntimeError:  # a nested tensor's output has no single shape
        return None, first.dtype, first.device


def shape_of(tensor: torch.Tensor) -> tuple[int, ...] | None:
    """``tuple(tensor.shape)``, or ``None`` for a tensor without one shape (nested)."""
    try:
        return tuple(tensor.shape)
    except RuntimeError:  # NestedTensorImpl doesn't support sizes
        return None


def version_of(tensor: torch.Tensor) -> int:
    """``tensor._version``: how many in-place writes its storage has had (a view shares
    its base's count); -1 where torch keeps none."""
    try:
        return int(tensor._version)
    except (RuntimeError, AttributeError):
        return -1


def shapes_of(tensors: list[torch.Tensor]) -> list[tuple[int, ...] | None]:
    """:func:`shape_of` of each tensor (one ``try`` for the list: this runs once per op)."""
    try:
        return [tuple(t.shape) for t in tensors]
    except RuntimeError:  # a nested tensor among them
        return [shape_of(t) for t in tensors]


def sequence_nr(fn: GradFn) -> int | None:
    """Autograd's creation counter of ``fn`` (later ops higher), or ``None`` if unknown."""
    method = getattr(fn, features.SEQUENCE_NR, None)
    if method is None:
        features.missing("_sequence_nr")
        return None
    return method()


def metadata(fn: GradFn) -> dict[str, Any]:
    """The node's own metadata dict (a throwaway dict where torch has none)."""
    try:
        return getattr(fn, features.METADATA)
    except AttributeError:
        features.missing("metadata")
        return {}


def gradient_edge_node(tensor: torch.Tensor) -> GradFn:
    """The node ``tensor``'s gradient flows into: its ``grad_fn``, or a leaf's ``AccumulateGrad``."""
    get = getattr(torch.autograd.graph, "get_gradient_edge", None)
    if get is not None:
        return get(tensor).node
    features.missing("get_gradient_edge")
    if tensor.grad_fn is not None:
        return tensor.grad_fn
    with torch.inference_mode(False), torch.enable_grad():
        # a view's one input is the leaf's accumulator, shared with its other uses
        # (a view of a tensor that requires grad always has a grad_fn, with the accumulator as input)
        return tensor.view_as(tensor).grad_fn.next_functions[0][0]  # type: ignore[union-attr,return-value]
