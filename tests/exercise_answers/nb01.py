"""Plausible wrong answers for 01_simple_backward.ipynb's exercises: each must fail its check."""

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
    ],
    "01.2": [
        # a tree walk: a node reached by two paths is counted twice
        ("def count_nodes(t):\n    def walk(fn):\n        if fn is None:\n            return 0\n"
        "        return 1 + sum(walk(c) for c, _ in fn.next_functions)\n    return walk(t.grad_fn)\n"),
        # follows only the first input of each node
        ("def count_nodes(t):\n    n, fn = 0, t.grad_fn\n    while fn is not None:\n        n += 1\n"
        "        fn = fn.next_functions[0][0] if fn.next_functions else None\n    return n\n"),
        # leaves out the leaves' AccumulateGrad nodes
        ("def count_nodes(t):\n    seen, stack = set(), [t.grad_fn]\n    while stack:\n        fn = stack.pop()\n"
        "        if fn is not None and fn not in seen and fn.next_functions:\n            seen.add(fn)\n"
        "            stack.extend(c for c, _ in fn.next_functions)\n    return len(seen)\n"),
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
    ],
}
