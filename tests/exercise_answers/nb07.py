"""Plausible wrong answers for 07_vanishing_gradients.ipynb's exercises: each must fail its check."""

WRONG = {
    "07.1": [
        # the anti-pattern of section 7: labels by counting parameters
        "def linear_norms(model):\n"
        "    return {f'layer {i // 2}': p.grad.norm() for i, (name, p) in enumerate(model.named_parameters())}\n",
        # every weight, LayerNorm weights included
        "def linear_norms(model):\n"
        "    return {name[:-len('.weight')]: p.grad.norm() for name, p in model.named_parameters()\n"
        "            if name.endswith('weight')}\n",
        # only the direct children: misses nested modules
        "def linear_norms(model):\n"
        "    return {name: m.weight.grad.norm() for name, m in model.named_children() if isinstance(m, nn.Linear)}\n",
        # the norm of the weights, not of their gradient
        "def linear_norms(model):\n"
        "    return {name: m.weight.norm() for name, m in model.named_modules() if isinstance(m, nn.Linear)}\n",
    ],
    "07.2": [
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
    ],
    "07.3": [
        # transposed: (in, out)
        "def linear_grads(x, dz):\n    return x.T @ dz, dz.sum(dim=0)\n",
        # averaged over the batch
        "def linear_grads(x, dz):\n    return dz.T @ x / len(x), dz.mean(dim=0)\n",
        # right weight gradient, bias as the mean
        "def linear_grads(x, dz):\n    return dz.T @ x, dz.mean(dim=0)\n",
        # only the first sample's outer product
        "def linear_grads(x, dz):\n    return torch.outer(dz[0], x[0]), dz[0]\n",
    ],
    "07.4": [
        # unchanged
        "tanh_fix = dict(act=nn.Tanh)\n",
        # swaps the activation
        "tanh_fix = dict(act=nn.ReLU, kaiming=True)\n",
        # a shallower net
        "tanh_fix = dict(act=nn.Tanh, depth=5)\n",
        # two changes at once
        "tanh_fix = dict(act=nn.Tanh, glorot=True, residual=True)\n",
    ],
}
