"""Plausible wrong answers for 10_forward_mode_and_the_graph_of_a_gradient.ipynb's exercises: each
must fail its check.

RIGHT lists other correct answers, which the check must accept."""

WRONG = {
    "10.1": [
        # dodges forward mode: the full Jacobian times v
        "def jvp_dual(f, x, v):\n    return torch.autograd.functional.jacobian(f, x) @ v\n",
        # the primal, not the tangent
        ("def jvp_dual(f, x, v):\n    with fwAD.dual_level():\n        out = f(fwAD.make_dual(x, v))\n"
         "        return fwAD.unpack_dual(out).primal\n"),
        # point and direction swapped
        ("def jvp_dual(f, x, v):\n    with fwAD.dual_level():\n        out = f(fwAD.make_dual(v, x))\n"
         "        return fwAD.unpack_dual(out).tangent\n"),
        # unpacked after the level ended: the tangent is gone (None)
        ("def jvp_dual(f, x, v):\n    with fwAD.dual_level():\n        out = f(fwAD.make_dual(x, v))\n"
         "    return fwAD.unpack_dual(out).tangent\n"),
        # reverse mode: v @ J has the input's shape
        "def jvp_dual(f, x, v):\n    out, pullback = vjp(f, x)\n    return pullback(torch.ones_like(out))[0]\n",
    ],
    "10.2": [
        # forward mode: no backward pass
        "def jacobian_by_vjp(f, x):\n    return jacfwd(f)(x)\n",
        # jacrev batches the rows into one backward pass
        "def jacobian_by_vjp(f, x):\n    return jacrev(f)(x)\n",
        # a new forward pass for every row
        ("def jacobian_by_vjp(f, x):\n    m = f(x).numel()\n"
         "    return torch.stack([vjp(f, x)[1](e)[0] for e in torch.eye(m, dtype=x.dtype)])\n"),
        # the transpose
        ("def jacobian_by_vjp(f, x):\n    out, pullback = vjp(f, x)\n"
         "    return torch.stack([pullback(e)[0] for e in torch.eye(out.numel(), dtype=x.dtype)]).T\n"),
        # one backward pass with all ones: the sum of the rows, repeated
        ("def jacobian_by_vjp(f, x):\n    out, pullback = vjp(f, x)\n"
         "    return torch.stack([pullback(torch.ones_like(out))[0]] * out.numel())\n"),
        # columns by jvp: forward mode
        ("def jacobian_by_vjp(f, x):\n"
         "    return torch.stack([jvp(f, (x,), (e,))[1] for e in torch.eye(x.numel(), dtype=x.dtype)], dim=1)\n"),
    ],
    "10.3": [
        # no create_graph: the penalty cannot be backpropagated
        ("def gradient_penalty(model, x):\n    x = x.detach().requires_grad_()\n"
         "    (slope,) = torch.autograd.grad(model(x).sum(), x)\n"
         "    return ((slope.norm(dim=1) - 1) ** 2).mean()\n"),
        # one norm over the whole batch, not one per sample
        ("def gradient_penalty(model, x):\n    x = x.detach().requires_grad_()\n"
         "    (slope,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)\n"
         "    return (slope.norm() - 1) ** 2\n"),
        # the slopes of the weights, not of the input
        ("def gradient_penalty(model, x):\n    w = model[0].weight\n"
         "    (slope,) = torch.autograd.grad(model(x).sum(), w, create_graph=True)\n"
         "    return ((slope.norm(dim=1) - 1) ** 2).mean()\n"),
        # the caller's x changed in place
        ("def gradient_penalty(model, x):\n    x.requires_grad_()\n"
         "    (slope,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)\n"
         "    return ((slope.norm(dim=1) - 1) ** 2).mean()\n"),
        # the squared norm, not (norm - 1) squared
        ("def gradient_penalty(model, x):\n    x = x.detach().requires_grad_()\n"
         "    (slope,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)\n"
         "    return (slope.norm(dim=1) ** 2).mean()\n"),
        # the penalty detached: the right value, no gradient for the weights
        ("def gradient_penalty(model, x):\n    x = x.detach().requires_grad_()\n"
         "    (slope,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)\n"
         "    return ((slope.norm(dim=1) - 1) ** 2).mean().detach()\n"),
    ],
}

RIGHT = {
    "10.1": [
        # unpack_dual's result as a tuple
        ("def jvp_dual(f, x, v):\n    with fwAD.dual_level():\n"
         "        primal, tangent = fwAD.unpack_dual(f(fwAD.make_dual(x, v)))\n        return tangent.clone()\n"),
        # torch.func.jvp: forward mode too (it passes f a dual tensor)
        "def jvp_dual(f, x, v):\n    return jvp(f, (x,), (v,))[1]\n",
        # jacfwd: forward mode too, a column per one-hot tangent, then J @ v
        "def jvp_dual(f, x, v):\n    return jacfwd(f)(x) @ v\n",
    ],
    "10.2": [
        # autograd.grad with retain_graph, one row at a time
        ("def jacobian_by_vjp(f, x):\n    x = x.detach().requires_grad_()\n    out = f(x)\n"
         "    return torch.stack([torch.autograd.grad(out[i], x, retain_graph=True)[0] "
         "for i in range(out.numel())])\n"),
        # jacrev, one row per chunk
        "def jacobian_by_vjp(f, x):\n    return jacrev(f, chunk_size=1)(x)\n",
    ],
    "10.3": [
        # per-sample norms written out, and torch.func for nothing
        ("def gradient_penalty(model, x):\n    x = x.clone().requires_grad_(True)\n"
         "    slope = torch.autograd.grad(model(x), x, grad_outputs=torch.ones(len(x), 1, dtype=x.dtype),\n"
         "                                create_graph=True)[0]\n"
         "    return (((slope ** 2).sum(dim=1).sqrt() - 1) ** 2).mean()\n"),
    ],
}
