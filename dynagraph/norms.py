"""Gradient norms per parameter, read with one host-device synchronisation."""

from __future__ import annotations

import math
from collections.abc import ItemsView, Iterable, Mapping
from typing import Any

import torch
from torch import nn

from . import _torch
from ._records import owner

__all__ = ["GradNorms", "NamedTensors", "device_norms", "grad_norms", "grad_stats", "named_tensors",
           "norm_of", "per_module", "rescaled_norms", "stack_on_host"]

# Where gradients are read from (checked at run time: other types raise TypeError).
NamedTensors = nn.Module | Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]


class GradNorms(dict[str, float]):
    """``{parameter name: gradient L2 norm}``, saying which are missing or non-finite.

    Parameters with no gradient map to ``nan`` and are listed in ``missing``;
    gradients with an ``inf`` or ``nan`` are listed in ``nonfinite``; gradients
    with no readable values (the ``meta`` device) map to ``nan`` with the reason in
    ``notes`` (``{name: reason}``).
    """

    def __init__(self, norms: Mapping[str, float], missing: Iterable[str] = (), nonfinite: Iterable[str] = (),
                 notes: Mapping[str, str] | None = None) -> None:
        super().__init__(norms)
        self.missing = list(missing)
        self.nonfinite = list(nonfinite)
        self.notes = dict(notes or {})

    def __repr__(self) -> str:
        body = ", ".join(f"{k!r}: {v:.4g}" for k, v in self.items())
        notes = f", notes={self.notes}" if self.notes else ""
        return f"GradNorms({{{body}}}, missing={self.missing}, nonfinite={self.nonfinite}{notes})"


def named_tensors(source: NamedTensors) -> list[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` pairs from a module, a mapping, or an iterable of pairs.

    Raises:
        TypeError: anything else, or a value that is not a tensor.
    """
    pairs: list[tuple[str, torch.Tensor]]
    if isinstance(source, nn.Module):
        pairs = list(source.named_parameters())
    elif isinstance(source, Mapping):
        pairs = list(source.items())
    elif isinstance(source, (list, tuple, ItemsView)) or hasattr(source, "__next__"):
        pairs = list(source)
    else:
        raise TypeError(
            "expected an nn.Module, a mapping name -> tensor or (name, tensor) pairs "
            f"(model.named_parameters()); got {type(source).__name__}"
        )
    for item in pairs:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], torch.Tensor)):
            raise TypeError(f"expected (name, tensor) pairs; got {item!r:.80}")
    return [(n if isinstance(n, str) else str(n), t) for n, t in pairs]  # names are text: {0: w} is "0"


def stack_on_host(values: list[torch.Tensor]) -> list[Any]:
    """Move small device tensors to the host with one synchronisation.

    float64 values stay float64 (their precision and range: a norm of 1e39 is no
    ``inf``); the others are read as float32.
    """
    if not values:
        return []
    wide = torch.float64 if any(v.dtype == torch.float64 for v in values) else torch.float32
    try:  # one device (the usual case): one stack, whatever the dtypes
        stacked = torch.stack(values)
    except (RuntimeError, TypeError):  # several devices: bring each to the first one's
        dev = values[0].device
        stacked = torch.stack([v.to(dev, wide) for v in values])
    return stacked.to(wide).tolist()


_HALF = (torch.float16, torch.bfloat16)  # summed in float32: the square of 256 overflows fp16
_PLAIN = (torch.float32, torch.float64)
_STRIDED = torch.strided
_vector_norm = torch.linalg.vector_norm
_COMPRESSED = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
META_NOTE = ("on the meta device: it has a shape but no values to take a norm of "
             "(materialise the model, e.g. model.to_empty(device='cpu'), load weights, then run backward)")


def _is_plain(g: torch.Tensor) -> bool:
    """Dense real float32/float64 on a real device: ``torch._foreach_norm`` takes it as is."""
    return (g.layout == torch.strided and not g.is_nested and g.device.type != "meta"
            and g.dtype in (torch.float32, torch.float64))


def _flat(g: torch.Tensor) -> torch.Tensor:
    """The stored values of ``g`` as a dense tensor (1-D unless ``g`` is): same L2 norm, any layout."""
    if g.layout == torch.sparse_coo:
        return g.coalesce().values().reshape(-1)  # repeated indices add up first
    if g.layout in _COMPRESSED:
        return g.values().reshape(-1)
    if g.is_nested and g.layout == torch.jagged:
        return g.values().reshape(-1)
    if g.is_nested:  # strided nested: one tensor per component, sizes known on the host
        return torch.cat([t.reshape(-1) for t in g.unbind()])
    return g  # dense: vector_norm flattens it without a copy


def norm_of(g: torch.Tensor) -> torch.Tensor | str:
    """L2 norm of any gradient on its device (real, fp16/bf16 summed in float32), or why not.

    Never raises: it runs inside autograd hooks, where an exception would abort the
    user's ``backward()``.
    """
    try:
        if g.layout is _STRIDED and g.dtype in _PLAIN and not (g.is_nested or g.is_meta or g.requires_grad):
            return _vector_norm(g)  # the usual case: a plain gradient (this runs once per gradient)
        if g.is_meta:
            return META_NOTE
        if g.layout == torch.strided and not g.is_nested and g.dtype not in _HALF:
            return torch.linalg.vector_norm(g.detach() if g.requires_grad else g)
        flat = _flat(g.detach())
        return torch.linalg.vector_norm(flat, dtype=torch.float32 if flat.dtype in _HALF else None)
    except Exception as e:  # noqa: BLE001 - a layout torch cannot reduce: say so, keep going
        return f"no norm for a {g.layout} {g.dtype} gradient: {type(e).__name__}: {str(e)[:120]}"


def device_norms(grads: list[torch.Tensor]) -> list[torch.Tensor | str]:
    """L2 norm of each gradient, computed on its device (no synchronisation), or a note.

    Plain dense gradients go through one ``torch._foreach_norm``; sparse, nested,
    complex, half-precision and meta ones through :func:`norm_of`.
    """
    out: list = [None if _is_plain(g) else norm_of(g) for g in grads]
    plain = [i for i, v in enumerate(out) if v is None]
    for i, norm in zip(plain, _torch.foreach_norm([grads[i] for i in plain])):
        out[i] = norm
    return out


def rescaled_norms(grads: list[torch.Tensor]) -> list[float | None]:
    """The L2 norm of each of ``grads`` as ``max|g| * ||g / max|g|||`` (host floats), or ``None``.

    A sum of squares overflows to ``inf`` (float32 or bfloat16 values above about
    1e19) or underflows to subnormals or 0 (values below about 1e-19) where the norm
    itself fits;
    dividing by the largest magnitude first keeps every square in [0, 1]. ``None``
    where a gradient holds an ``inf`` or ``nan``, is all zeros, or cannot be read.
    One synchronisation for all of them (callers pass only such rare gradients).
    """
    out: list[float | None] = [None] * len(grads)
    rows, where = [], []
    for i, g in enumerate(grads):
        try:
            flat = _flat(g.detach()).reshape(-1)
            if flat.numel() == 0:
                continue
            if flat.dtype in _HALF:  # (divided in float32: a bfloat16 quotient keeps 8 bits)
                flat = flat.float()
            top = flat.abs().amax()
            inner = torch.linalg.vector_norm(flat / top)
            rows.append(torch.stack([top, inner]))
            where.append(i)
        except Exception:  # noqa: BLE001 - as in norm_of: keep the first answer
            continue
    for i, (top, inner) in zip(where, stack_on_host(rows)):
        if math.isfinite(top) and top > 0 and math.isfinite(inner):
            out[i] = top * inner
    return out


def _out_of_range(norm: float, grad: torch.Tensor) -> bool:
    """Whether ``norm`` may be off because the squares summed for it left their dtype's
    normal range: ``inf``, or below the square root of the smallest normal number
    (1.1e-19 in float32, where bfloat16 and float16 are summed too), where squares are
    subnormal (for a float32 gradient of values near 1e-23 it was half the true norm) or 0."""
    if norm == math.inf:
        return True
    wide = grad.dtype in (torch.float64, torch.complex128)
    return norm < math.sqrt(torch.finfo(torch.float64 if wide else torch.float32).tiny)


def grad_norms(source: NamedTensors) -> GradNorms:
    """L2 norm of each parameter's ``.grad``, with one host-device synchronisation.

    Sparse (``nn.Embedding(sparse=True)``), nested and complex gradients get their
    true norm; float16/bfloat16 ones are summed in float32. Where the squares leave
    their dtype's normal range (float32 and bfloat16 values above about 1e19 or
    below about 1e-19), ``torch.linalg.vector_norm`` gives ``inf``, 0 or a norm off
    by up to half; such a norm of a finite gradient that is not all zeros is
    computed again, rescaled (:func:`rescaled_norms`, one more synchronisation for
    all of them), so a finite gradient is never reported as ``inf`` nor a nonzero
    one as 0.
    float64 gradients keep float64 precision. Sparse gradients are coalesced first
    (on CUDA, one more synchronisation each).

    Args:
        source: An ``nn.Module``, a mapping name -> tensor, or ``(name, tensor)`` pairs.

    Returns:
        A :class:`GradNorms` dict in parameter order; parameters without a gradient
        are ``nan`` and listed in ``.missing``, non-finite ones in ``.nonfinite``,
        and ones whose gradient has no readable values (the ``meta`` device) are
        ``nan`` with the reason in ``.notes``.

    Example:
        >>> loss = model(x).sum(); loss.backward()
        >>> dg.grad_norms(model)["0.weight"]  # equals model[0].weight.grad.norm().item()
    """
    pairs = named_tensors(source)
    present = [(n, t.grad.detach()) for n, t in pairs if t.grad is not None]
    results = device_norms([g for _, g in present])
    notes = {n: r for (n, _), r in zip(present, results) if isinstance(r, str)}
    readable = [(n, r) for (n, _), r in zip(present, results) if not isinstance(r, str)]
    found = dict(zip((n for n, _ in readable), stack_on_host([r for _, r in readable])))
    again = [(n, g) for n, g in present if n in found and _out_of_range(found[n], g)]
    for (name, _), norm in zip(again, rescaled_norms([g for _, g in again]) if again else []):
        if norm is not None:
            found[name] = norm
    norms = {n: found.get(n, math.nan) for n, _ in pairs}
    missing = [n for n, _ in pairs if n not in found and n not in notes]
    nonfinite = [n for n, v in found.items() if not math.isfinite(v)]
    return GradNorms(norms, missing, nonfinite, notes)


def _stats(g: torch.Tensor) -> torch.Tensor | str:
    """``[norm, mean |g|, max |g|]`` on the device, counting a sparse gradient's implicit zeros."""
    norm = norm_of(g)
    if isinstance(norm, str):
        return norm
    try:
        mags = _flat(g.detach()).reshape(-1).abs().float()
        count = g.numel() if g.layout != torch.strided else mags.numel()
        if count > mags.numel() or count == 0:  # unstored entries of a sparse gradient are 0
            mags = torch.cat([mags, mags.new_zeros(1)])
        return torch.stack([norm.float(), mags.sum() / max(count, 1), mags.max()])
    except Exception as e:  # noqa: BLE001 - as in norm_of: a note, not a crash
        return f"no statistics for a {g.layout} {g.dtype} gradient: {type(e).__name__}"


def grad_stats(source: NamedTensors) -> dict[str, tuple[float, float, float]]:
    """``{name: (norm, mean |grad|, max |grad|)}`` of parameters with a readable gradient (one sync)."""
    pairs = [(n, t.grad.detach()) for n, t in named_tensors(source) if t.grad is not None]
    stats = [(n, _stats(g)) for n, g in pairs]
    rows = [(n, r) for n, r in stats if not isinstance(r, str)]
    values = stack_on_host([r for _, r in rows])
    return {n: tuple(v) for (n, _), v in zip(rows, values)}


def per_module(norms: Mapping[str, float]) -> dict[str, float]:
    """Combine parameter norms into one norm per module (``fc.weight`` + ``fc.bias`` -> ``fc``).

    The module of a parameter is its name without the last part, so layers without
    a bias, or with norm layers between them, are labelled correctly. A module with
    any missing gradient is ``nan``.
    """
    groups: dict[str, list[float]] = {}
    for name, value in norms.items():
        groups.setdefault(owner(name) or name, []).append(value)
    # hypot, not sqrt(sum of squares): 1e200 squared is inf and 1e-170 squared is 0 (as float64)
    return {m: math.nan if any(math.isnan(v) for v in vs) else math.hypot(*vs) for m, vs in groups.items()}
