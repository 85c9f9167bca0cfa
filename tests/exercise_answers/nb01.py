"""Plausible wrong answers for 01_simple_backward.ipynb's exercises: each must fail its check.

RIGHT lists other correct answers, which the check must accept."""

# Exercise 5's class as the stub gives it, without backward(); each wrong answer adds one.
VALUE = '''
import math


class Value:
    """A number that remembers how it was made, as autograd's tensors do."""

    def __init__(self, data, _prev=()):
        self.data = float(data)
        self.grad = 0.0
        self._prev = set(_prev)        # the Values this one was made from
        self._backward = lambda: None  # adds this Value's grad into its inputs' grads

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other))
        def _backward():
            self.grad += out.grad      # d(a + b)/da = 1
            other.grad += out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other))
        def _backward():
            self.grad += other.data * out.grad   # d(a * b)/da = b
            other.grad += self.data * out.grad
        out._backward = _backward
        return out

    __radd__ = __add__                 # 2 + v
    __rmul__ = __mul__                 # 2 * v

    def tanh(self):
        t = math.tanh(self.data)
        out = Value(t, (self,))
        def _backward():
            self.grad += (1 - t * t) * out.grad  # d tanh(a)/da = 1 - tanh(a)^2
        out._backward = _backward
        return out
'''

# The backward() of the solution: a topological order, then each _backward once, in reverse.
TOPOLOGICAL = '''
    def backward(self):
        order, seen = [], set()
        def visit(v):
            if v not in seen:
                seen.add(v)
                for child in v._prev:
                    visit(child)
                order.append(v)
        visit(self)
        self.grad = 1.0
        for v in reversed(order):
            v._backward()
'''

# Answers that tests/test_exercises.py also grades by name, to check what their verdict says.

# 01.1, right: a name for the backward pass bound before the check ran (issue 31, E1)
GRAD_IMPORTED = ("from torch.autograd import grad\n\ndef derivative(f, xs):\n    x = xs.clone().requires_grad_()\n"
                 "    return grad(f(x).sum(), x)[0]\n")
BACKWARD_IMPORTED = ("from torch.autograd import backward as _bw\n\ndef derivative(f, xs):\n"
                     "    x = xs.clone().requires_grad_()\n    y = f(x)\n    _bw(y, torch.ones_like(y))\n"
                     "    return x.grad\n")
# 01.1, wrong: the same name, one backward pass per point
GRAD_IMPORTED_PER_POINT = ("from torch.autograd import grad\n\ndef derivative(f, xs):\n"
                           "    x = xs.clone().requires_grad_()\n    y = f(x)\n"
                           "    return torch.stack([grad(y[i], x, retain_graph=True)[0][i] for i in range(len(x))])\n")
# 01.2, dodges: dynagraph's walk reached another way than `dg.draw` (E2)
DRAW_BY_IMPORTLIB = ("import importlib\n\ndef count_nodes(t):\n"
                     "    return sum(importlib.import_module('dynagraph.draw').draw(t).counts().values())\n")
PRIVATE_WALK = ("import dynagraph._walk\n\ndef count_nodes(t):\n    seen = []\n"
                "    dynagraph._walk.reach([t.grad_fn], lambda fn: seen.append(fn) or True)\n    return len(seen)\n")
# 01.2, wrong: follows only the first entry of next_functions (E8)
FIRST_ENTRY_ONLY = ("def count_nodes(t):\n    n, fn = 0, t.grad_fn\n    while fn is not None:\n        n += 1\n"
                    "        fn = fn.next_functions[0][0] if fn.next_functions else None\n    return n\n")
# 01.3, dodge: retain_grad() called, but dy/dh worked out by hand (E3)
RETAINED_BUT_BY_HAND = ("def h_grad(x):\n    h = x * x\n    h.retain_grad()\n    (h * h).sum().backward()\n"
                        "    return 2 * h.detach()\n")
# 01.3, right: a copy of the kept gradient
RETAINED_CLONE = ("def h_grad(x):\n    h = x * x\n    h.retain_grad()\n    (h * h).sum().backward()\n"
                  "    return h.grad.clone()\n")

WRONG = {
    "01.1": [
        # backward() on a non-scalar output
        "def derivative(f, xs):\n    x = xs.clone().requires_grad_()\n    f(x).backward()\n    return x.grad\n",
        # changes the caller's tensor, and its gradient accumulates over calls
        "def derivative(f, xs):\n    xs.requires_grad_()\n    f(xs).sum().backward()\n    return xs.grad\n",
        # weights each point by x instead of 1
        "def derivative(f, xs):\n    x = xs.clone().requires_grad_()\n    f(x).backward(gradient=xs)\n    return x.grad\n",
        # finite differences: close, not exact
        "def derivative(f, xs):\n    h = 1e-3\n    return (f(xs + h) - f(xs)) / h\n",
        # one backward() per point: right values, n backward passes
        ("def derivative(f, xs):\n    out = []\n    for p in xs:\n        x = p.clone().requires_grad_()\n"
         "        f(x).backward()\n        out.append(x.grad)\n    return torch.stack(out)\n"),
        # per-point gradients with torch.func: f runs on one point at a time
        "def derivative(f, xs):\n    return torch.func.vmap(torch.func.grad(f))(xs)\n",
        # the whole Jacobian, one backward pass per output, then its diagonal
        "def derivative(f, xs):\n    return torch.autograd.functional.jacobian(f, xs).diagonal()\n",
        # the whole Jacobian in one batched pass
        "def derivative(f, xs):\n    return torch.autograd.functional.jacobian(f, xs, vectorize=True).diagonal()\n",
        # torch.func's reverse-mode Jacobian
        "def derivative(f, xs):\n    return torch.func.jacrev(f)(xs).diagonal()\n",
        # uses the caller's xs as the leaf, then undoes the change: xs required grad for a while
        ("def derivative(f, xs):\n    xs.requires_grad_()\n    f(xs).sum().backward()\n    g = xs.grad\n"
         "    xs.grad = None\n    xs.requires_grad_(False)\n    return g\n"),
        # forward mode: right values, but no backward pass at all
        ("import torch.autograd.forward_ad as fwAD\n\ndef derivative(f, xs):\n    with fwAD.dual_level():\n"
         "        d = fwAD.make_dual(xs, torch.ones_like(xs))\n        return fwAD.unpack_dual(f(d)).tangent\n"),
        # mean() instead of sum(): each weight is 1/n, not 1
        "def derivative(f, xs):\n    x = xs.clone().requires_grad_()\n    f(x).mean().backward()\n    return x.grad\n",
        GRAD_IMPORTED_PER_POINT,
    ],
    "01.2": [
        # a tree walk: a node reached by two paths is counted twice
        ("def count_nodes(t):\n    def walk(fn):\n        if fn is None:\n            return 0\n"
        "        return 1 + sum(walk(c) for c, _ in fn.next_functions)\n    return walk(t.grad_fn)\n"),
        # follows only the first input of each node
        FIRST_ENTRY_ONLY,
        # the same, skipping a `None` first entry: still misses the other inputs
        ("def count_nodes(t):\n    n, fn = 0, t.grad_fn\n    while fn is not None:\n        n += 1\n"
         "        nxt = [c for c, _ in fn.next_functions if c is not None]\n        fn = nxt[0] if nxt else None\n"
         "    return n\n"),
        # leaves out the leaves' AccumulateGrad nodes
        ("def count_nodes(t):\n    seen, stack = set(), [t.grad_fn]\n    while stack:\n        fn = stack.pop()\n"
        "        if fn is not None and fn not in seen and fn.next_functions:\n            seen.add(fn)\n"
        "            stack.extend(c for c, _ in fn.next_functions)\n    return len(seen)\n"),
        # dynagraph's walk instead of one's own
        "def count_nodes(t):\n    return sum(dg.draw(t).counts().values())\n",
        DRAW_BY_IMPORTLIB,
        PRIVATE_WALK,
        # dynagraph's drawing function under a name bound before the check ran
        "from dynagraph.draw import draw as picture\n\ndef count_nodes(t):\n    return sum(picture(t).counts().values())\n",
        # counts each leaf once, but an operation's node once per path
        ("def count_nodes(t):\n    leaves = set()\n    def walk(fn):\n        if fn is None:\n            return 0\n"
         "        if not fn.next_functions:\n            if fn in leaves:\n                return 0\n"
         "            leaves.add(fn)\n            return 1\n"
         "        return 1 + sum(walk(c) for c, _ in fn.next_functions)\n    return walk(t.grad_fn)\n"),
        # a set kept between calls: a leaf used by an earlier graph is not counted again
        ("SEEN = set()\n\ndef count_nodes(t):\n    stack, n = [t.grad_fn], 0\n    while stack:\n        fn = stack.pop()\n"
         "        if fn is None or fn in SEEN:\n            continue\n        SEEN.add(fn)\n        n += 1\n"
         "        stack.extend(c for c, _ in fn.next_functions)\n    return n\n"),
    ],
    "01.3": [
        # no retain_grad(): h.grad stays None
        "def h_grad(x):\n    h = x * x\n    y = (h * h).sum()\n    y.backward()\n    return h.grad\n",
        # retain_grad() called after backward(): too late
        "def h_grad(x):\n    h = x * x\n    y = (h * h).sum()\n    y.backward()\n    h.retain_grad()\n    return h.grad\n",
        # returns the leaf's gradient instead
        "def h_grad(x):\n    h = x * x\n    h.retain_grad()\n    (h * h).sum().backward()\n    return x.grad\n",
        # backward twice: the gradient accumulates
        ("def h_grad(x):\n    h = x * x\n    h.retain_grad()\n    y = (h * h).sum()\n"
        "    y.backward(retain_graph=True)\n    y.backward()\n    return h.grad\n"),
        # dy/dh worked out by hand, not taken from autograd
        "def h_grad(x):\n    h = x * x\n    y = (h * h).sum()\n    y.backward()\n    return 2 * h.detach()\n",
        # the same with a token retain_grad()
        RETAINED_BUT_BY_HAND,
        # retain_grad(), then h.grad times 1: a new tensor, not the kept gradient
        ("def h_grad(x):\n    h = x * x\n    h.retain_grad()\n    (h * h).sum().backward()\n"
         "    return h.grad * 1\n"),
        # torch.autograd.grad instead of y.backward(): x.grad is never filled
        "def h_grad(x):\n    h = x * x\n    y = (h * h).sum()\n    return torch.autograd.grad(y, h)[0]\n",
        # a hook catches dy/dh instead of retain_grad()
        ("def h_grad(x):\n    h = x * x\n    caught = []\n    h.register_hook(caught.append)\n"
         "    (h * h).sum().backward()\n    return caught[0]\n"),
        # h made a new leaf: the graph no longer reaches x
        "def h_grad(x):\n    h = (x * x).detach().requires_grad_()\n    (h * h).sum().backward()\n    return h.grad\n",
    ],
    "01.4": [
        # recorded update: w becomes a non-leaf
        "def sgd_step(w, lr):\n    w = w - lr * w.grad\n    return w\n",
        # right update, gradient left in place
        "def sgd_step(w, lr):\n    with torch.no_grad():\n        w -= lr * w.grad\n",
        # wrong sign
        "def sgd_step(w, lr):\n    with torch.no_grad():\n        w += lr * w.grad\n    w.grad = None\n",
        # out of place under no_grad: new memory
        "def sgd_step(w, lr):\n    with torch.no_grad():\n        w.data = w - lr * w.grad\n    w.grad = None\n",
        # the .data update the notebook warns against: autograd's version counter never sees it
        "def sgd_step(w, lr):\n    w.data -= lr * w.grad\n    w.grad = None\n",
        "def sgd_step(w, lr):\n    w.data.sub_(lr * w.grad)\n    w.grad = None\n",
        # .data under no_grad: still invisible to the version counter
        "def sgd_step(w, lr):\n    with torch.no_grad():\n        w.data -= lr * w.grad\n    w.grad = None\n",
        # in place while autograd records: PyTorch refuses
        "def sgd_step(w, lr):\n    w.sub_(lr * w.grad)\n    w.grad = None\n",
        # set_() points w at new memory
        "def sgd_step(w, lr):\n    with torch.no_grad():\n        w.set_(w - lr * w.grad)\n    w.grad = None\n",
    ],
    "01.5": [
        # depth-first from the output, each _backward in visit order: h runs before all its users have
        VALUE + '''
    def backward(self):
        self.grad = 1.0
        seen = set()
        def visit(v):
            if v not in seen:
                seen.add(v)
                v._backward()
                for child in v._prev:
                    visit(child)
        visit(self)
''',
        # the topological order, but not reversed: leaves run first, with no gradient yet
        VALUE + TOPOLOGICAL.replace("reversed(order)", "order"),
        # `=` instead of `+=`: a Value used twice keeps only the last contribution
        VALUE.replace(".grad += ", ".grad = ") + TOPOLOGICAL,
        # no seed: the output's own grad stays 0, so nothing reaches the leaves
        VALUE + TOPOLOGICAL.replace("        self.grad = 1.0\n", ""),
        # breadth first from the output: a Value reached by a short and a long path runs too early
        VALUE + '''
    def backward(self):
        self.grad = 1.0
        queue, seen = [self], {self}
        while queue:
            v = queue.pop(0)
            v._backward()
            for child in v._prev:
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
''',
        # a topological order without a set of visited Values: a shared Value runs more than once
        VALUE + TOPOLOGICAL.replace("            if v not in seen:\n                seen.add(v)\n", "            if True:\n"),
        # the seed set after the loop: every _backward ran with a grad of 0
        VALUE + TOPOLOGICAL.replace("        self.grad = 1.0\n", "").replace(
            "            v._backward()\n", "            v._backward()\n        self.grad = 1.0\n"),
        # the wrong kind: a function that makes tensors, not a class of Values
        "def Value(data):\n    return torch.tensor(data, requires_grad=True)\n",
    ],
}

RIGHT = {
    "01.1": [GRAD_IMPORTED, BACKWARD_IMPORTED],
    "01.3": [
        RETAINED_CLONE,
        "def h_grad(x):\n    h = x * x\n    h.retain_grad()\n    (h * h).sum().backward()\n    return h.grad.detach()\n",
        "def h_grad(x):\n    h = x * x\n    h.retain_grad()\n    (h * h).sum().backward()\n    return torch.clone(h.grad)\n",
    ],
}
