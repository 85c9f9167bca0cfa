"""Plausible wrong answers for 08_jit_and_graph_capture.ipynb's exercises: each must fail its check."""

# 08.2: the NaN-gradient trap, which tests/test_exercises.py grades three times (issue 31, E12)
NAN_TRAP = "def scale_by_max_no_break(x):\n    m = x.max()\n    return torch.where(m > 0, x / m, x)\n"

WRONG = {
    "08.1": [
        # one call per time step: nn.RNN runs a whole sequence per call
        "def predicted_rnn_calls(lengths):\n    return int(lengths.sum())\n",
        # the longest sequence decides
        "def predicted_rnn_calls(lengths):\n    return int(lengths.max())\n",
        # one call per distinct length
        "def predicted_rnn_calls(lengths):\n    return len(set(lengths.tolist()))\n",
        # the right count, but measured by tracing a copy of the loop: the question asks to predict
        "def predicted_rnn_calls(lengths):\n"
        "    class Loop(nn.Module):\n"
        "        def __init__(self):\n"
        "            super().__init__()\n"
        "            self.rnn = nn.RNN(4, 8, batch_first=True)\n"
        "        def forward(self, x, lengths):\n"
        "            return torch.stack([self.rnn(x[i:i + 1, :int(lengths[i])])[1][-1, 0]\n"
        "                                for i in range(x.shape[0])])\n"
        "    with warnings.catch_warnings():\n"
        "        warnings.simplefilter('ignore')\n"
        "        traced = torch.jit.trace(Loop(), (torch.randn(len(lengths), int(lengths.max()), 4), lengths))\n"
        "    return str(traced.inlined_graph).count('aten::rnn_tanh')\n",
        # the same through trace_module, imported before the check runs
        "from torch.jit import trace_module\n"
        "def predicted_rnn_calls(lengths):\n"
        "    class Loop(nn.Module):\n"
        "        def __init__(self):\n"
        "            super().__init__()\n"
        "            self.rnn = nn.RNN(4, 8, batch_first=True)\n"
        "        def forward(self, x):\n"
        "            return torch.stack([self.rnn(x[i:i + 1, :int(lengths[i])])[1][-1, 0]\n"
        "                                for i in range(x.shape[0])])\n"
        "    with warnings.catch_warnings():\n"
        "        warnings.simplefilter('ignore')\n"
        "        traced = trace_module(Loop(), {'forward': torch.randn(len(lengths), int(lengths.max()), 4)})\n"
        "    return str(traced.inlined_graph).count('aten::rnn_tanh')\n",
    ],
    "08.2": [
        # the NaN-gradient trap: right values, 0/0 in the unused branch
        NAN_TRAP,
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
        # the trap with a reciprocal: 1 / m in the branch that is not picked still gives NaN
        "def scale_by_max_no_break(x):\n"
        "    m = x.max()\n"
        "    return x * torch.where(m > 0, 1 / m, 1.0)\n",
        # a leftover debugging print: right values and gradients, but a graph break
        "def scale_by_max_no_break(x):\n"
        "    m = x.max()\n"
        "    print(m)\n"
        "    return x / torch.where(m > 0, m, 1.0)\n",
        # dividing by the absolute maximum: wrong values when every entry is negative
        "def scale_by_max_no_break(x):\n"
        "    return x / x.abs().max()\n",
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
        # as if a Linear without a bias became a plain matrix product
        "def predicted_aten_ops(model):\n"
        "    return ['aten.mm.default' if isinstance(m, nn.Linear) and m.bias is None\n"
        "            else f'aten.{type(m).__name__.lower()}.default' for m in model]\n",
        # the right list, but read from torch.export itself: the question asks to predict
        "from torch.export import export\n"
        "def predicted_aten_ops(model):\n"
        "    exported = export(model, (torch.randn(2, model[0].in_features),))\n"
        "    return [str(node.target) for node in exported.graph.nodes if node.op == 'call_function']\n",
    ],
}

# Right answers the questions allow, each spelled another way: each must be "solved".
RIGHT = {
    "08.1": [
        # the number of sequences, spelled another way
        "def predicted_rnn_calls(lengths):\n    return lengths.numel()\n",
    ],
    "08.2": [
        # an arithmetic mask instead of torch.where: m where m > 0, else 1
        "def scale_by_max_no_break(x):\n"
        "    m = x.max()\n"
        "    return x / (m * (m > 0) + (m <= 0))\n",
        # the double-where form: the guarded division sits inside a where of its own
        "def scale_by_max_no_break(x):\n"
        "    m = x.max()\n"
        "    safe = torch.where(m > 0, m, torch.ones_like(m))\n"
        "    return torch.where(m > 0, x / safe, x)\n",
    ],
    "08.3": [
        # a tuple instead of a list
        "def predicted_aten_ops(model):\n"
        "    return tuple(f'aten.{type(m).__name__.lower()}.default' for m in model)\n",
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
