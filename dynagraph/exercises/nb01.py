"""Checks for 01_simple_backward.ipynb."""

from __future__ import annotations

import contextlib
import math
import random
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .._language import N_, tr, translated
from . import CLASS, exercise, expect, filled
from ._backward import counting_backward

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
import dynagraph as dg
"""


# -- 01.1 -------------------------------------------------------------------------------

@dataclass
class _Passes:
    """What one call of the learner's ``derivative`` did: its backward passes (``batched``
    marks a batched one, a whole Jacobian) and the inputs it called ``f`` on."""

    backward: int = 0
    batched: bool = False
    f_inputs: list[tuple[tuple[int, ...], bool]] = field(default_factory=list)  # (shape, inside torch.func)
    on_xs: bool = False  # f was called on the caller's tensor itself, not on a leaf of one's own


def _in_torch_func(t: torch.Tensor) -> bool:
    """Whether ``t`` is a tensor that a ``torch.func`` transform (vmap, grad, jacrev) wrapped."""
    probe = getattr(torch._C._functorch, "is_functorch_wrapped_tensor", None)
    return bool(probe(t)) if probe is not None else False


@contextlib.contextmanager
def _counting_passes() -> Iterator[_Passes]:
    """Count the backward passes that reach autograd's engine inside the block, however the
    answer started them (``Tensor.backward``, ``torch.autograd.grad``, or a name for either
    bound before the check ran); the engine's entry is restored after, even on error."""
    passes = _Passes()
    with counting_backward() as engine:
        try:
            yield passes
        finally:
            passes.backward, passes.batched = engine.count, engine.batched


_Fn = Callable[[torch.Tensor], torch.Tensor]


def _watched(f: _Fn, passes: _Passes, xs: torch.Tensor) -> _Fn:
    """``f``, noting the shape of each input it is called on, and whether it is ``xs`` itself."""
    def f_watched(t: torch.Tensor) -> torch.Tensor:
        passes.f_inputs.append((tuple(t.shape), _in_torch_func(t)))
        passes.on_xs |= t is xs
        return f(t)
    return f_watched


def _count(n: int, one: str, many: str) -> str:
    """``n`` things for a hint: ``one`` or ``many`` (messages marked with ``N_``, with ``{n}``)."""
    return translated(one if n == 1 else many, n=n)


def _one_pass(passes: _Passes, shape: tuple[int, ...]) -> None:
    """Fail unless ``derivative`` called f once on all the points and ran one plain backward pass."""
    n = shape[0]  # the number of points
    expect(not passes.on_xs,
           tr("`f` ran on `xs` itself, so your answer made the caller's tensor require grad, even if "
              "only for a while. Leave `xs` as it is: make your own leaf, a copy of `xs` that "
              "requires grad, and call `f` on that."),
           code="`x = xs.clone().requires_grad_()`")
    expect(not any(wrapped for _, wrapped in passes.f_inputs),
           tr("`f` ran inside a `torch.func` transform (`vmap`, `grad`, `jacrev`). This exercise is about "
              "the graph that autograd records: call f on a leaf that holds all the points, then run "
              "one backward pass (section 4)."))
    expect(len(passes.f_inputs) == 1 and passes.f_inputs[0][0] == shape,
           tr("`f` was called {times}, on inputs of shape {shapes}, but `xs` has shape {shape}. Call f "
              "once, on one leaf that holds all the points: one graph gives every derivative.",
              times=_count(len(passes.f_inputs), N_("{n} time"), N_("{n} times")),
              shapes=[s for s, _ in passes.f_inputs], shape=shape))
    expect(not passes.batched,
           tr("A batched backward pass (`vectorize=True`, `is_grads_batched=True`) computes a whole "
              "Jacobian, one row per output. For an elementwise f one plain pass is enough: weight "
              "every output by 1 (section 4)."))
    expect(passes.backward == 1,
           tr("Your answer ran {passes} for {points}. One pass gives the derivative at every point of "
              "an elementwise f: weight every output by 1 with `gradient=` (section 4).",
              passes=_count(passes.backward, N_("{n} backward pass"), N_("{n} backward passes")),
              points=_count(n, N_("{n} point"), N_("{n} points"))),
           code=tr("one leaf `x` that holds all the points, `y = f(x)`, then a single "
                   "`y.backward(gradient=...)`: which weight does each point need?"))


@exercise("01.1", N_("the derivative of an elementwise function at many points, with one backward pass"),
          answer="derivative")
def _derivative(derivative: Any) -> None:
    cases = [  # (f, its analytic derivative, the points)
        (lambda t: 3 * t ** 2 + 2 * t, lambda t: 6 * t + 2, [2.0]),
        (lambda t: 3 * t ** 2 + 2 * t, lambda t: 6 * t + 2, [-1.5, 0.0, 2.0, 4.0]),
        (torch.sin, torch.cos, [0.0, 0.5, 1.0, 3.0]),
        (lambda t: t.exp() * t, lambda t: t.exp() * (t + 1), [-2.0, 0.25, 1.0]),
    ]
    for f, df, points in cases:
        for _ in range(2):  # twice on the same tensor: nothing may carry over
            xs = torch.tensor(points)
            try:
                with _counting_passes() as passes:
                    got = derivative(_watched(f, passes, xs), xs)
            except RuntimeError as e:
                expect("implicitly created only for scalar" not in str(e),
                       tr("`backward()` without an argument works only for a scalar output. Here "
                          "`f(x)` has one value per point: give backward a weight for each output, "
                          "with `gradient=` (section 4)."),
                       code=tr("`y.backward(gradient=...)`, where `...` has the shape of `y` and "
                               "the same weight for every point: which weight?"))
                raise
            expect(not xs.requires_grad and xs.grad is None,
                   tr("Your function changed the caller's tensor (`requires_grad_` or `.grad` on "
                      "`xs` itself). Leave `xs` as it is: make your own leaf, a copy of `xs` that "
                      "requires grad."),
                   code="`x = xs.clone().requires_grad_()`")
            expect(isinstance(got, torch.Tensor) and got.shape == xs.shape,
                   tr("Return a tensor of shape {shape} (one derivative per point), got {type} {got_shape}.",
                      shape=tuple(xs.shape), type=type(got).__name__,
                      got_shape=tuple(getattr(got, "shape", ()))))
            expect(got.grad_fn is None,
                   tr("The result still carries a graph (`grad_fn`): return the leaf's `.grad`."))
            want = df(torch.tensor(points))
            if not torch.allclose(got, want, rtol=1e-5, atol=1e-6):
                expect(not torch.allclose(got, want, rtol=1e-2, atol=1e-2),
                       tr("At x = {points} the derivative is {want}, you got {got}: close, not exact. "
                          "Finite differences are an approximation; let `backward()` compute the "
                          "derivative.", points=points, want=want.tolist(), got=got.tolist()))
                expect(False, tr("At x = {points} the derivative is {want}, you got {got}. `gradient=` "
                                 "weights each output (it is v in v·J): for the plain derivative every "
                                 "weight is 1 (section 4).", points=points, want=want.tolist(),
                                 got=got.tolist()))
            _one_pass(passes, tuple(xs.shape))
    x = torch.tensor([1.0, 2.0])
    expect(not derivative(torch.exp, x).requires_grad,
           tr("Return a plain tensor, not one that requires grad."))


# -- 01.2 -------------------------------------------------------------------------------

def _nodes(t: torch.Tensor, tree: bool = False, leaves: bool = True) -> int:
    """The reference: the nodes reachable from ``t.grad_fn``, each once (or, with ``tree``,
    once per path: the mistake to diagnose); ``leaves=False`` leaves out ``AccumulateGrad``."""
    seen, count, stack = set(), 0, [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or (fn in seen and not tree):
            continue
        seen.add(fn)
        count += leaves or type(fn).__name__ != "AccumulateGrad"
        stack.extend(child for child, _ in fn.next_functions)
    return count


_PACKAGE = Path(__file__).resolve().parent.parent      # dynagraph/
_OWN = (_PACKAGE / "exercises", _PACKAGE / "_language.py")  # the checks and their messages


def _in_dynagraph(code: CodeType) -> bool:
    """Whether ``code`` is a function of dynagraph itself (its checks and messages aside)."""
    where = Path(code.co_filename)
    return (code.co_name != "<module>" and where.is_relative_to(_PACKAGE)
            and not any(where.is_relative_to(own) for own in _OWN))


@contextlib.contextmanager
def _watching_dynagraph() -> Iterator[list[str]]:
    """Note, in the list yielded, each dynagraph function that runs inside the block, however
    the answer reached it (``dg.draw``, ``importlib``, a private module, a name bound earlier).
    The exercise is to write the walk; the profile function is put back after, even on error."""
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and not called and _in_dynagraph(frame.f_code):
            called.append(frame.f_code.co_name)

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(before)


@exercise("01.2", N_("a walk over grad_fn and next_functions that counts every node once"),
          answer="count_nodes")
def _count_nodes(count_nodes: Any) -> None:
    for code, t in _graphs_to_count().items():
        with _watching_dynagraph() as called:
            got, again = count_nodes(t), count_nodes(t)
        expect(not called,
               tr("Your function called dynagraph (`{name}`), which walks the graph for you. The "
                  "exercise is to write the walk yourself: start at `t.grad_fn` and follow each "
                  "node's `next_functions`.", name=called[0] if called else ""))
        want = _nodes(t)
        expect(got == again,
               tr("For `{code}` your function returned {got}, then {again} for the same graph: "
                  "something carries over from one call to the next. Make the set of seen nodes "
                  "inside the function, new for each call.", code=code, got=got, again=again))
        expect(isinstance(got, int) and not isinstance(got, bool),
               tr("Return the number of nodes as an int, got {type}.", type=type(got).__name__))
        if got != want:
            _wrong_count(t, code, got, want)


def _graphs_to_count() -> dict[str, torch.Tensor]:
    """The graphs whose nodes the learner counts, by the code that makes each."""
    x = torch.tensor([1.0], requires_grad=True)
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    c = torch.tensor([3.0])                                     # a constant: no node
    s = (x * w).sin()                                           # its node is used three times
    h = x
    for _ in range(3):                                          # every node is used twice
        h = h * 0.5 + h * 1.5
    return {
        "2 * x + 1": 2 * x + 1,
        "(x * 2 + 1) * x": (x * 2 + 1) * x,                     # x is used twice
        "c * x + c": c * x + c,
        "((x + 1) * (x + 1)).sin()": ((x + 1) * (x + 1)).sin(),
        "(x * w).exp().sum() + (x * w).sum()": (x * w).exp().sum() + (x * w).sum(),
        "s = (x * w).sin(); (s * s + s).sum()": (s * s + s).sum(),
        "h = x; three times: h = h * 0.5 + h * 1.5": h,
    }


def _wrong_count(t: torch.Tensor, code: str, got: int, want: int) -> None:
    """Fail, naming the mistake that counts ``got`` nodes of ``t``'s graph (``code``) where
    there are ``want``."""
    expect(got != _nodes(t, tree=True),
           tr("For `{code}` you counted {got} nodes, but the graph has {want}: a node that two "
              "paths reach was counted once per path. This happens to any node whose result is "
              "used twice, an operation's node as well as a leaf's `AccumulateGrad`. Keep a set "
              "of all the nodes already seen.", code=code, got=got, want=want))
    expect(got not in (_first_entries(t, skip_none=False), _first_entries(t, skip_none=True)),
           tr("For `{code}` you counted {got} nodes, but the graph has {want}: your walk follows "
              "only the first entry of each node's `next_functions`. A node has one entry for each "
              "input of its operation. Follow every entry, and skip only the `None` entries "
              "(inputs that need no gradient).", code=code, got=got, want=want))
    expect(got != _nodes(t, leaves=False),
           tr("For `{code}` you counted {got} nodes, but the graph has {want}: the leaves' "
              "`AccumulateGrad` nodes count too (they appear in `next_functions`).",
              code=code, got=got, want=want))
    expect(False, tr("For `{code}` you counted {got} nodes, but the graph has {want}. Follow "
                     "*every* entry of `next_functions` (not only the first), skip the `None` "
                     "entries (inputs that need no gradient), and count each node once, also an "
                     "operation's node that two paths reach.", code=code, got=got, want=want))


def _first_entries(t: torch.Tensor, skip_none: bool) -> int:
    """The mistake to diagnose: the nodes on the chain that follows only the first entry of
    each node's ``next_functions`` (``skip_none``: the first entry that is not ``None``)."""
    count, fn = 0, t.grad_fn
    while fn is not None:
        count += 1
        children = [child for child, _ in fn.next_functions if child is not None or not skip_none]
        fn = children[0] if children else None
    return count


# -- 01.3 -------------------------------------------------------------------------------

@contextlib.contextmanager
def _watching_retain_grad() -> Iterator[list[torch.Tensor]]:
    """Inside the block, every tensor on which ``retain_grad()`` is called is noted in the
    list yielded; ``Tensor.retain_grad`` is restored after, even on error."""
    retained: list[torch.Tensor] = []
    original = torch.Tensor.retain_grad
    own = "retain_grad" in vars(torch.Tensor)  # False: inherited from the C base class

    def retain_grad(self: torch._C.TensorBase) -> None:
        retained.append(self)  # type: ignore[arg-type]
        original(self)

    try:
        torch.Tensor.retain_grad = retain_grad  # type: ignore[method-assign]
        yield retained
    finally:
        if own:
            torch.Tensor.retain_grad = original  # type: ignore[method-assign]
        else:
            delattr(torch.Tensor, "retain_grad")


# Tensor methods and torch functions whose result holds the same numbers as their input:
# a copy (or a view) of the retained `.grad` is still the gradient that autograd kept.
_COPIES = frozenset({"clone", "detach", "to", "contiguous", "float", "double", "cpu", "cuda", "type",
                     "view", "view_as", "reshape"})


class _Copies(TorchFunctionMode):
    """Records each copy or view (``_COPIES``) made inside the block: (input, output)."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[object, object]] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") in _COPIES and args:
            self.made.append((args[0], out))
        return out


def _kept_gradient(got: torch.Tensor, retained: list[torch.Tensor], copies: _Copies) -> bool:
    """Whether ``got`` is the ``.grad`` of a tensor that ``retain_grad()`` kept, shares its
    memory, or is a copy of it (``copies``: what the answer copied, in order)."""
    kept = [t.grad for t in retained if t.grad is not None]
    for source, out in copies.made:
        if any(source is k for k in kept) and isinstance(out, torch.Tensor):
            kept.append(out)
    where = got.untyped_storage().data_ptr()
    return any(got is k or k.untyped_storage().data_ptr() == where for k in kept)


@exercise("01.3", N_("the gradient that reaches an intermediate tensor, kept with retain_grad()"),
          answer="h_grad")
def _h_grad(h_grad: Any) -> None:
    for start in ([1.0, 2.0], [-0.5, 0.5, 3.0], [2.0]):
        x = torch.tensor(start, requires_grad=True)
        with (warnings.catch_warnings(record=True) as caught, _watching_retain_grad() as retained,
              _Copies() as copies):
            warnings.simplefilter("always")
            got = h_grad(x)
        warned = any("not a leaf" in str(w.message) for w in caught)
        expect(got is not None,
               tr("You returned `None`: `h` is not a leaf, so `backward()` does not keep its "
                  "`.grad`. Call `h.retain_grad()` *before* `backward()` (section 5).")
               + (tr(" PyTorch warned you about it.") if warned else ""))
        xs = torch.tensor(start)
        want = 2 * xs ** 2                                       # y = sum(h^2): dy/dh = 2h = 2x^2
        expect(isinstance(got, torch.Tensor) and got.shape == x.shape,
               tr("Return dy/dh, a tensor of shape {shape}.", shape=tuple(x.shape)))
        x_grad = filled(x.grad, tr("`x.grad` was not filled. `y.backward()` fills the leaves' `.grad` "
                                    "(`torch.autograd.grad` does not), and only when `h` is computed "
                                    "from `x` itself, not from a detached copy."))
        expect(not torch.allclose(got, 2 * want),
               tr("At x = {start} you got {got}, twice dy/dh = {want}: gradients accumulate, so call "
                  "`backward()` only once.", start=start, got=got.tolist(), want=want.tolist()))
        expect(torch.allclose(got, want),
               tr("At x = {start}, dy/dh should be 2h = {want}, got {got}. Return the gradient that "
                  "reached `h` (`h.grad`), not `x.grad`.", start=start, want=want.tolist(),
                  got=got.tolist()))
        expect(torch.allclose(x_grad, 4 * xs ** 3),
               tr("After one backward(), x.grad should be dy/dx = 4x^3 = {want}, got {got}.",
                  want=(4 * xs ** 3).tolist(), got=x_grad.tolist()))
        expect(not got.requires_grad, tr("Return a plain tensor (`h.grad`), not one with a graph."))
        expect(_kept_gradient(got, retained, copies),
               tr("The value is right, but it is not the gradient that `retain_grad()` kept: return "
                  "`h.grad` itself. The exercise is to let backward() compute dy/dh and keep it on `h` "
                  "with `retain_grad()`: not to catch it with a hook, nor to work it out by hand."))


# -- 01.4 -------------------------------------------------------------------------------

@exercise("01.4", N_("an SGD step that updates the leaf in place, unrecorded, and clears its gradient"),
          answer="sgd_step")
def _sgd_step(sgd_step: Any) -> None:
    for start, lr in (([1.0, -1.0], 0.5), ([3.0, 0.5, -2.0], 0.1)):
        w = torch.tensor(start, requires_grad=True)
        (w ** 2).sum().backward()
        want = w.detach() - lr * 2 * torch.tensor(start)  # d(sum w^2)/dw = 2w
        before, version = w.data_ptr(), w._version
        try:
            out = sgd_step(w, lr)
        except RuntimeError as e:
            expect("leaf Variable that requires grad" not in str(e),
                   tr("PyTorch refused the in-place change: `w` is a leaf that requires grad, and "
                      "autograd was recording. Make the update where nothing is recorded (section 8)."))
            raise
        expect(out is None or out is w,
               tr("Update `w` itself; `sgd_step` should not build and return a new tensor."))
        expect(w.is_leaf and w.grad_fn is None,
               tr("`w` is no longer a leaf: the update was recorded. Do it under `torch.no_grad()`."))
        expect(w.data_ptr() == before,
               tr("`w` points at new memory: change the numbers inside `w` in place, so that it "
                  "stays the same tensor."),
               code=tr("`w -= ...` or `w.sub_(...)`, under `torch.no_grad()`"))
        expect(w.requires_grad, tr("`w` no longer requires grad; keep it a trainable leaf."))
        expect(torch.allclose(w.detach(), want),
               tr("With lr={lr}, w should become {want}, got {got}: step against the gradient, "
                  "w - lr * w.grad.", lr=lr, want=want.tolist(), got=w.detach().tolist()))
        expect(w._version > version,
               tr("`w` changed, but its version counter (`w._version`) did not: the update went "
                  "through `.data`, which autograd cannot see. If a graph had saved `w`, its backward "
                  "would silently use the new value. Change `w` itself, in place, under "
                  "`torch.no_grad()`: that bumps `w._version` (section 8)."))
        expect(w.grad is None or not w.grad.any(),
               tr("`w.grad` still holds the old gradient: clear it, or the next backward adds to it."),
               code="`w.grad = None`")


# -- 01.5 -------------------------------------------------------------------------------

# An expression program: each step makes a new value from earlier ones (``r0`` ... are the
# leaves). ("add", i, j), ("mul", i, j): two values (i == j uses one value twice);
# ("tanh", i); ("addc", i, c), ("mulc", i, c), ("rmulc", i, c): a value and a number.
_Step = tuple[Any, ...]


@dataclass(frozen=True)
class _Program:
    name: str
    leaves: tuple[float, ...]
    steps: tuple[_Step, ...]

    def code(self) -> str:
        lines = [f"r{i} = Value({v:g})" for i, v in enumerate(self.leaves)]
        n = len(self.leaves)
        forms = {"add": "r{i} + r{a}", "mul": "r{i} * r{a}", "tanh": "r{i}.tanh()",
                 "addc": "r{i} + {a}", "mulc": "r{i} * {a}", "rmulc": "{a} * r{i}"}
        for k, (op, i, arg) in enumerate(self.steps):
            lines.append(f"r{n + k} = " + forms[op].format(i=i, a=arg))
        return "; ".join(lines)

    def run(self, make: Callable[[float], Any], tanh: Callable[[Any], Any]) -> tuple[list[Any], Any]:
        """Build the expression from leaves made by ``make``; return the leaves and the root."""
        regs = self.values(make, tanh)
        return regs[:len(self.leaves)], regs[-1]

    def values(self, make: Callable[[float], Any], tanh: Callable[[Any], Any]) -> list[Any]:
        """Build the expression; return every value it names (``r0`` ...), in program order."""
        regs = [make(v) for v in self.leaves]
        for op, i, arg in self.steps:
            a = regs[i]
            if op == "add":
                regs.append(a + regs[arg])
            elif op == "mul":
                regs.append(a * regs[arg])
            elif op == "tanh":
                regs.append(tanh(a))
            elif op == "addc":
                regs.append(a + arg)
            elif op == "mulc":
                regs.append(a * arg)
            else:
                regs.append(arg * a)
        return regs


_SQUARE = _Program("x * x", (3.0,), (("mul", 0, 0),))
# h is used by two nodes that the output uses: h must wait for both.
_SHARED = _Program("h = x * y; out = h * 2 + h * 3", (1.5, -2.0),
                   (("mul", 0, 1), ("mulc", 2, 2.0), ("mulc", 2, 3.0), ("add", 3, 4)))


def _random_program(seed: int) -> _Program:
    """A random expression over 2-4 leaves that uses every leaf and reuses earlier values
    (seeded: the same every time)."""
    rng = random.Random(seed)
    leaves = tuple(rng.choice([-1.5, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0]) for _ in range(rng.randint(2, 4)))
    steps: list[_Step] = []
    for k in range(1, len(leaves)):  # first, fold every leaf into one value
        steps.append((rng.choice(["add", "mul"]), len(leaves) + k - 2 if k > 1 else 0, k))
    for _ in range(rng.randint(4, 7)):  # then build on the newest value, reusing any earlier one
        n = len(leaves) + len(steps)
        op = rng.choice(["add", "mul", "mul", "tanh", "addc", "mulc", "rmulc"])
        if op in ("add", "mul"):
            steps.append((op, n - 1, rng.randrange(n)))
        elif op == "tanh":
            steps.append((op, n - 1, None))
        else:
            steps.append((op, n - 1, rng.choice([-2.0, -1.5, -0.5, 0.5, 1.5, 2.0])))
    return _Program(f"random expression {seed}", leaves, tuple(steps))


def _torch_grads(program: _Program) -> list[float]:
    """The reference: PyTorch's gradients of the root with respect to each leaf (0 if unused)."""
    leaves, root = program.run(lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True),
                               torch.tanh)
    grads = torch.autograd.grad(root, leaves, allow_unused=True)
    return [0.0 if g is None else g.item() for g in grads]


# Ten random expressions in which every leaf gets a gradient (the first such seeds).
_RANDOM = [p for p in map(_random_program, range(40)) if all(abs(g) > 1e-3 for g in _torch_grads(p))][:10]


class _InOrder(set):
    """A set that iterates in the order it was given, not in the order of its items' hashes."""

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self._order = items

    def __iter__(self) -> Iterator[Any]:
        listed = [v for v in self._order if v in self]
        return iter(listed + [v for v in set.__iter__(self) if v not in listed])


def _fix_prev_order(values: list[Any], backwards: bool) -> None:
    """Make each Value's ``_prev`` iterate in program order (``backwards``: the reverse).

    The notebook's Value keeps ``_prev`` in a set, whose order follows the Values'
    hashes: their memory addresses. A ``backward()`` whose result depends on that order
    (a wrong one) would give other numbers, and so another hint, on every run.
    """
    rank = {id(v): k for k, v in enumerate(values)}
    def key(v: Any) -> int:  # a Value made inside an op (a constant) ranks after the program's values
        k = rank.get(id(v), len(values))
        return -k if backwards else k
    seen: set[int] = set()
    stack = [values[-1]]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        prev = getattr(v, "_prev", None)
        if not isinstance(prev, (set, frozenset, list, tuple)):
            continue  # not the stub's Value: leave it as it is
        ordered = sorted(prev, key=key)
        try:
            v._prev = _InOrder(ordered) if isinstance(prev, (set, frozenset)) else type(prev)(ordered)
        except (AttributeError, TypeError):
            continue
        stack.extend(ordered)


def _close(got: list[float], want: list[float]) -> bool:
    return all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12) for g, w in zip(got, want))


@exercise("01.5", N_("a scalar autograd engine whose backward() runs the nodes in reverse topological order"),
          answer="Value", kind=CLASS)
def _value(Value: Any) -> None:
    programs = [_SQUARE, _SHARED] + _RANDOM
    # Each program twice: `_prev` in program order, then in reverse (the same on every run).
    for program, backwards in ((p, b) for p in programs for b in (False, True)):
        values = program.values(Value, lambda v: v.tanh())
        _fix_prev_order(values, backwards)
        leaves, root = values[:len(program.leaves)], values[-1]
        datas = [v.data for v in leaves]
        root.backward()
        expect(root.grad == 1,
               tr("After `out.backward()`, `out.grad` should be 1 (d out / d out), it is {grad}. "
                  "Seed the output's own gradient before any `_backward` runs.", grad=root.grad))
        expect([v.data for v in leaves] == datas,
               tr("backward() changed `.data`; it should only fill `.grad`."))
        got, want = [v.grad for v in leaves], _torch_grads(program)
        if _close(got, want):
            continue
        expect(any(got),
               tr("For `{program}` every leaf's grad is still 0: no gradient reached the leaves. "
                  "Each `_backward` passes on the grad that its Value holds at that moment. So seed "
                  "the output's grad with 1 *before* any `_backward` runs, and start with the "
                  "output: a Value runs only after every Value made from it.", program=program.name))
        if program is _SQUARE:
            expect(False, tr("For `x * x` at x = 3, x.grad should be 2x = 6, got {got}. A Value used "
                             "twice must get the sum of both contributions: every `_backward` adds "
                             "into `.grad` (`+=`), never assigns it.", got=got[0]))
        if program is _SHARED:
            expect(False, tr("For `{program}` at x = 1.5, y = -2, the leaves' grads should be "
                             "{want}, got {got}. The Value `h` ran its `_backward` before both of "
                             "its users had added their gradient to `h.grad`. Run the Values in "
                             "reverse topological order: a Value only after every Value made from it.",
                             program=program.name, want=want, got=got),
                   code=tr("a depth-first walk that appends a Value after all of its `_prev` gives "
                           "`order`; then call `v._backward()` for v in reversed(order)"))
        expect(False, tr("For `{code}` PyTorch's grads of the leaves are {want}, yours are {got}. Visit "
                         "each Value once, in reverse topological order, and add (`+=`) what arrives.",
                         code=program.code(), want=want, got=got))
