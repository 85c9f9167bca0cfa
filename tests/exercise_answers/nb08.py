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
    ],
    "08.4": [
        # one compile per distinct size, whatever `dynamic` says
        "def predicted_compiles(sizes, dynamic):\n    return len(set(sizes))\n",
        # the default treated like dynamic=False
        "def predicted_compiles(sizes, dynamic):\n    return 1 if dynamic else len(set(sizes))\n",
        # a compile on every call
        "def predicted_compiles(sizes, dynamic):\n    return len(sizes)\n",
    ],
}
