"""Plausible wrong answers for 07_vanishing_gradients.ipynb's exercises: each must fail its check.

RIGHT lists other correct answers, which the check must accept. ``tests/test_exercises.py``
reads both.
"""

# 07.2: autograd computes the gradients of a layer made for the purpose (issue 31, E4)
AUTOGRAD_LAYER = ("def linear_grads(x, dz):\n"
                  "    W = torch.zeros(dz.shape[1], x.shape[1], requires_grad=True)\n"
                  "    b = torch.zeros(dz.shape[1], requires_grad=True)\n"
                  "    (x @ W.T + b).backward(dz)\n"
                  "    return W.grad, b.grad\n")
# 07.2, right: the pair as a list (E7)
LIST_PAIR = "def linear_grads(x, dz):\n    return [dz.T @ x, dz.sum(0)]\n"
# 07.3: a truthy string where build(...) takes True (E6)
GLOROT_YES = "deep_fix = dict(act=nn.Tanh, glorot='yes')\n"

WRONG = {
    "07.1": [
        # grad_input: the gradient of the block's input, one block off
        "def block_output_grad_norms(model, x, y):\n"
        "    norms, handles = {}, []\n"
        "    for i, block in enumerate(model.blocks):\n"
        "        def hook(module, grad_input, grad_output, i=i):\n"
        "            norms[i] = grad_input[0].norm().item()\n"
        "        handles.append(block.register_full_backward_hook(hook))\n"
        "    F.cross_entropy(model(x), y).backward()\n"
        "    for h in handles:\n"
        "        h.remove()\n"
        "    return [norms[i] for i in range(len(model.blocks))]\n",
        # hooks left behind
        "def block_output_grad_norms(model, x, y):\n"
        "    norms = {}\n"
        "    for i, block in enumerate(model.blocks):\n"
        "        block.register_full_backward_hook(lambda m, gi, go, i=i: norms.__setitem__(i, go[0].norm().item()))\n"
        "    F.cross_entropy(model(x), y).backward()\n"
        "    return [norms[i] for i in range(len(model.blocks))]\n",
        # in the order the hooks fire (backward: last block first)
        "def block_output_grad_norms(model, x, y):\n"
        "    norms, handles = [], []\n"
        "    for block in model.blocks:\n"
        "        handles.append(block.register_full_backward_hook(lambda m, gi, go: norms.append(go[0].norm().item())))\n"
        "    F.cross_entropy(model(x), y).backward()\n"
        "    for h in handles:\n"
        "        h.remove()\n"
        "    return norms\n",
        # weight-gradient norms of each block's Linear layer instead of dL/dh
        "def block_output_grad_norms(model, x, y):\n"
        "    F.cross_entropy(model(x), y).backward()\n"
        "    return [block.linear.weight.grad.norm().item() for block in model.blocks]\n",
        # retain_grad(), which the question says to replace (right numbers, not the asked tool)
        "def block_output_grad_norms(model, x, y):\n"
        "    outs = []\n"
        "    def keep(module, inputs, h):\n"
        "        h.retain_grad()\n"
        "        outs.append(h)\n"
        "    handles = [block.register_forward_hook(keep) for block in model.blocks]\n"
        "    F.cross_entropy(model(x), y).backward()\n"
        "    for h in handles:\n"
        "        h.remove()\n"
        "    return [h.grad.norm().item() for h in outs]\n",
        # autograd.grad with respect to the block outputs: no hook records anything
        "def block_output_grad_norms(model, x, y):\n"
        "    outs = []\n"
        "    handles = [b.register_forward_hook(lambda m, i, o: outs.append(o)) for b in model.blocks]\n"
        "    loss = F.cross_entropy(model(x), y)\n"
        "    for h in handles:\n"
        "        h.remove()\n"
        "    return [g.norm().item() for g in torch.autograd.grad(loss, outs)]\n",
        # a tensor hook on each output, not a module's full backward hook
        "def block_output_grad_norms(model, x, y):\n"
        "    norms = {}\n"
        "    def on_output(i):\n"
        "        def keep(module, inputs, h):\n"
        "            h.register_hook(lambda g: norms.__setitem__(i, g.norm().item()))\n"
        "        return keep\n"
        "    handles = [b.register_forward_hook(on_output(i)) for i, b in enumerate(model.blocks)]\n"
        "    F.cross_entropy(model(x), y).backward()\n"
        "    for h in handles:\n"
        "        h.remove()\n"
        "    return [norms[i] for i in range(len(model.blocks))]\n",
        # the old, deprecated register_backward_hook (not "full")
        "def block_output_grad_norms(model, x, y):\n"
        "    norms, handles = {}, []\n"
        "    for i, block in enumerate(model.blocks):\n"
        "        def hook(module, grad_input, grad_output, i=i):\n"
        "            norms[i] = grad_output[0].norm().item()\n"
        "        handles.append(block.register_backward_hook(hook))\n"
        "    F.cross_entropy(model(x), y).backward()\n"
        "    for h in handles:\n"
        "        h.remove()\n"
        "    return [norms[i] for i in range(len(model.blocks))]\n",
    ],
    "07.2": [
        # transposed: (in, out)
        "def linear_grads(x, dz):\n    return x.T @ dz, dz.sum(dim=0)\n",
        # averaged over the batch
        "def linear_grads(x, dz):\n    return dz.T @ x / len(x), dz.mean(dim=0)\n",
        # right weight gradient, bias as the mean
        "def linear_grads(x, dz):\n    return dz.T @ x, dz.mean(dim=0)\n",
        # only the first sample's outer product
        "def linear_grads(x, dz):\n    return torch.outer(dz[0], x[0]), dz[0]\n",
        AUTOGRAD_LAYER,
        # the same through torch.func.vjp of F.linear
        ("def linear_grads(x, dz):\n    W = torch.zeros(dz.shape[1], x.shape[1])\n    b = torch.zeros(dz.shape[1])\n"
         "    _, vjp = torch.func.vjp(lambda W, b: F.linear(x, W, b), W, b)\n    return vjp(dz)\n"),
    ],
    "07.3": [
        # unchanged tanh: vanishes
        "deep_fix = dict(act=nn.Tanh)\n",
        # ReLU alone: vanishes
        "deep_fix = dict(act=nn.ReLU)\n",
        # sigmoid + LayerNorm alone: still vanishes (the shared 0.5 offset)
        "deep_fix = dict(act=nn.Sigmoid, norm=nn.LayerNorm)\n",
        # ReLU + BatchNorm at depth 30: explodes toward the input
        "deep_fix = dict(act=nn.ReLU, norm=nn.BatchNorm1d)\n",
        # ReLU + residual: dL/dh explodes toward the input
        "deep_fix = dict(act=nn.ReLU, residual=True)\n",
        # Glorot init for ReLU: made for tanh, still vanishes
        "deep_fix = dict(act=nn.ReLU, glorot=True)\n",
        # Kaiming init for sigmoid: still vanishes
        "deep_fix = dict(act=nn.Sigmoid, kaiming=True)\n",
        # a shallower net
        "deep_fix = dict(act=nn.Tanh, depth=5)\n",
        # two changes at once
        "deep_fix = dict(act=nn.Tanh, glorot=True, residual=True)\n",
        # an instance, not the class
        "deep_fix = dict(act=nn.Tanh(), glorot=True)\n",
        # the wrong kind: the activation's class, not a dict of build arguments
        "deep_fix = nn.Tanh\n",
        GLOROT_YES,
        "deep_fix = dict(act=nn.ReLU, kaiming=1)\n",            # 1, not True
    ],
}

RIGHT = {
    "07.1": [
        # norms kept as tensors, appended in firing order (last block first), then reversed
        "def block_output_grad_norms(model, x, y):\n"
        "    norms, handles = [], []\n"
        "    for block in model.blocks:\n"
        "        handles.append(block.register_full_backward_hook(lambda m, gi, go: norms.append(go[0].norm())))\n"
        "    F.cross_entropy(model(x), y).backward()\n"
        "    for h in handles:\n"
        "        h.remove()\n"
        "    return norms[::-1]\n",
    ],
    "07.2": [
        "def linear_grads(x, dz):\n    return torch.einsum('bo,bi->oi', dz, x), dz.sum(0)\n",
        "def linear_grads(x, dz):\n    return (dz[:, :, None] * x[:, None, :]).sum(0), dz.sum(0)\n",
        "def linear_grads(x, dz):\n    return (x.T @ dz).T, dz.sum(dim=0)\n",
        # the right values, in float64
        "def linear_grads(x, dz):\n    return dz.double().T @ x.double(), dz.double().sum(0)\n",
        LIST_PAIR,
    ],
    "07.3": [
        "deep_fix = dict(act=nn.Tanh, glorot=True)\n",
        "deep_fix = dict(act=nn.Tanh, norm=nn.LayerNorm)\n",
        "deep_fix = dict(act=nn.ReLU, norm=nn.LayerNorm)\n",
        "deep_fix = dict(act=nn.ReLU, kaiming=True)\n",
        "deep_fix = dict(act=nn.Sigmoid, norm=nn.BatchNorm1d)\n",
        "deep_fix = dict(act=nn.Sigmoid, residual=True)\n",
        "deep_fix = dict(act=nn.Tanh, residual=True)\n",
        "deep_fix = dict(act=nn.Tanh, norm=nn.BatchNorm1d)\n",
        "deep_fix = dict(act=nn.Tanh, kaiming=True)\n",
        # the other switches given as False: no change
        "deep_fix = dict(act=nn.Tanh, glorot=True, residual=False, kaiming=False)\n",
    ],
}
