"""What an answer does with autograd's backward pass: counted (01.1) or refused (05.1, 07.2).

Both watch the engine's entry, ``_engine_run_backward``, that ``torch.autograd.backward``
(and so ``Tensor.backward``) and ``torch.autograd.grad`` call. Patching it, and not only the
public names, also sees a backward pass started through a name the learner bound before the
check ran (``from torch.autograd import grad``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

# The engine's entry: torch.autograd imports it from torch.autograd.graph, and calls it
# through its own module's name (torch.compiler patches both in the same way).
_ENGINE = [(torch.autograd, "_engine_run_backward"), (torch.autograd.graph, "_engine_run_backward")]

# Every public way into the backward pass, and the engine's entry (covers names imported earlier).
_BACKWARD_ENTRIES = [(torch.Tensor, "backward"), (torch.autograd, "backward"), (torch.autograd, "grad"),
                     *_ENGINE]


class BackwardRefused(Exception):
    """Raised inside :func:`no_backward` by any attempt to run autograd's backward pass."""


@contextlib.contextmanager
def _patched(entries: list[tuple[Any, str]], wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]]
             ) -> Iterator[None]:
    """Inside the block each ``owner.name`` of ``entries`` is ``wrap(name, original)``;
    restored after, even on error."""
    saved = [(owner, name, getattr(owner, name)) for owner, name in entries if hasattr(owner, name)]
    try:
        for owner, name, fn in saved:
            setattr(owner, name, wrap(name, fn))
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


@contextlib.contextmanager
def no_backward() -> Iterator[list[str]]:
    """Inside the block every backward pass (on any model, a copy included) raises
    :class:`BackwardRefused`; the list yielded names each attempt. Restored after, even on error."""
    attempts: list[str] = []

    def refuse(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            attempts.append(name)
            raise BackwardRefused(f"{name}() is not allowed in this exercise")
        return refused

    with _patched(_BACKWARD_ENTRIES, refuse):
        yield attempts


@dataclass
class Passes:
    """The backward passes run inside :func:`counting_backward`: how many, and whether one
    was batched (``is_grads_batched=True``: a whole Jacobian in one pass)."""

    count: int = 0
    batched: bool = False


def _is_batched(t: object) -> bool:
    """Whether ``t`` is a tensor that vmap batched (``is_grads_batched`` gives the engine one)."""
    names = ("is_batchedtensor", "is_legacy_batchedtensor")
    probes = [getattr(torch._C._functorch, name, None) for name in names]
    return isinstance(t, torch.Tensor) and any(bool(probe(t)) for probe in probes if probe is not None)


@contextlib.contextmanager
def counting_backward() -> Iterator[Passes]:
    """Count the backward passes that reach the engine inside the block, however they
    were started; the engine's entry is restored after, even on error."""
    passes = Passes()

    def counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(outputs: Any, *args: Any, **kwargs: Any) -> Any:
            passes.count += 1
            grads = args[0] if args else kwargs.get("grad_tensors", ())
            passes.batched |= any(_is_batched(g) for g in (grads or ()))
            return fn(outputs, *args, **kwargs)
        return run

    with _patched(_ENGINE, counted):
        yield passes
