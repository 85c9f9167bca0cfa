"""Plausible wrong answers for 08_jit_and_graph_capture.ipynb's exercises: each must fail its check."""

WRONG = {
    "08.1": [
        # one call per time step: nn.RNN runs a whole sequence per call
        "def predicted_rnn_calls(lengths):\n    return int(lengths.sum())\n",
        # the longest sequence decides
        "def predicted_rnn_calls(lengths):\n    return int(lengths.max())\n",
        # one call per distinct length
        "def predicted_rnn_calls(lengths):\n    return len(set(lengths.tolist()))\n",
    ],
    "08.2": [
        # the NaN-gradient trap: right values, 0/0 in the unused branch
        "def scale_by_max_no_break(x):\n"
        "    m = x.max()\n"
        "    return torch.where(m > 0, x / m, x)\n",
        # the original: right values and gradients, but a graph break
        "def scale_by_max_no_break(x):\n"
        "    m = x.max().item()\n"
        "    return x / m if m > 0 else x\n",
        # a Python `if` on a tensor: right values and gradients, but a graph break
        "def scale_by_max_no_break(x):\n"
        "    m = x.max()\n"
        "    return x / m if m > 0 else x\n",
        # a detached maximum: right values, wrong gradient
        "def scale_by_max_no_break(x):\n"
        "    m = x.max().detach()\n"
        "    return x / torch.where(m > 0, m, 1.0)\n",
        # clamping the maximum: wrong values for a negative maximum
        "def scale_by_max_no_break(x):\n"
        "    return x / x.max().clamp(min=1e-12)\n",
    ],
    "08.3": [
        # as if export split linear into transpose + addmm
        "def predicted_aten_ops(model):\n"
        "    ops = []\n"
        "    for m in model:\n"
        "        if isinstance(m, nn.Linear):\n"
        "            ops += [torch.ops.aten.t.default, torch.ops.aten.addmm.default]\n"
        "        else:\n"
        "            ops.append(torch.ops.aten.relu.default)\n"
        "    return ops\n",
        # only the Linear layers
        "def predicted_aten_ops(model):\n"
        "    return [torch.ops.aten.linear.default for m in model if isinstance(m, nn.Linear)]\n",
        # every activation is a relu
        "def predicted_aten_ops(model):\n"
        "    return [torch.ops.aten.linear.default if isinstance(m, nn.Linear) else torch.ops.aten.relu.default\n"
        "            for m in model]\n",
        # the right ops, but the packets (no overload): export records `.default`
        "def predicted_aten_ops(model):\n"
        "    ops = {nn.Linear: torch.ops.aten.linear, nn.ReLU: torch.ops.aten.relu,\n"
        "           nn.Tanh: torch.ops.aten.tanh, nn.Sigmoid: torch.ops.aten.sigmoid}\n"
        "    return [ops[type(m)] for m in model]\n",
        # as strings, spelled the way the question writes them, but linear split into t + addmm
        "def predicted_aten_ops(model):\n"
        "    ops = []\n"
        "    for m in model:\n"
        "        name = type(m).__name__.lower()\n"
        "        ops += ['torch.ops.aten.t.default', 'torch.ops.aten.addmm.default'] if name == 'linear' \\\n"
        "            else [f'torch.ops.aten.{name}.default']\n"
        "    return ops\n",
        # TorchScript's spelling of op names, not export's
        "def predicted_aten_ops(model):\n"
        "    return [f'aten::{type(m).__name__.lower()}' for m in model]\n",
    ],
}

# Right answers the questions allow, each spelled another way: each must be "solved".
RIGHT = {
    "08.2": [
        # the double-where form: the guarded division sits inside a where of its own
        "def scale_by_max_no_break(x):\n"
        "    m = x.max()\n"
        "    safe = torch.where(m > 0, m, torch.ones_like(m))\n"
        "    return torch.where(m > 0, x / safe, x)\n",
    ],
    "08.3": [
        # the op names as strings, spelled exactly as the question writes them
        "def predicted_aten_ops(model):\n"
        "    return [f'torch.ops.aten.{type(m).__name__.lower()}.default' for m in model]\n",
        # the op names as str(node.target) prints them
        "def predicted_aten_ops(model):\n"
        "    return [f'aten.{type(m).__name__.lower()}.default' for m in model]\n",
        # the ops themselves, looked up by name
        "def predicted_aten_ops(model):\n"
        "    return [getattr(torch.ops.aten, type(m).__name__.lower()).default for m in model]\n",
    ],
}
