"""Plausible wrong answers for 03_debugging_pdb.ipynb's exercises: each must fail its check.

RIGHT lists other correct answers, which the check must accept. Some change the kernel's state
on the way (a breakpoint, grad mode, the default dtype): ``tests/test_exercise_state.py``
proves that the check puts it back.
"""

# 03.1: pdb commands that show the function the check stops in (issue 31, N6)
ARGS = 'commands1 = "a\\nc\\n"\n'
LISTING = 'commands1 = "l\\nc\\n"\n'

WRONG = {
    "03.1": [
        'commands1 = "p a\\nc\\n"\n',                 # prints the tensor, not the number
        'commands1 = "p a.item()\\n"\n',              # no `c`: pdb reads end-of-file and quits
        'commands1 = "!a = a.item()\\nc\\n"\n',       # changes `a` instead of printing it
        # print no number: the hint shows what the commands printed, and once showed pdb's
        # location line, which names the check's file on this machine (issue 16)
        'commands1 = "c\\n"\n',                        # prints nothing
        'commands1 = "p a.tolist()\\nc\\n"\n',         # a list, not the number
        'commands1 = "w\\nc\\n"\n',                     # `where`: the stack, with file paths
        'commands1 = "p __file__\\nn\\nc\\n"\n',       # a path, then `next`: a location line
        'commands1 = ["p a.item()", "c"]\n',             # the wrong kind: a list, not one string
        ARGS,                                            # pdb's `args`: the function's parameters
        LISTING,                                         # pdb's `list`: the function's lines
    ],
    "03.2": [
        'commands2 = "a = a * 2\\nc\\n"\n',           # read as pdb's `args` command
        'commands2 = "!a = a.detach() * 2\\nc\\n"\n', # right value, cut from the graph
        'commands2 = "!a = a * 2\\n"\n',              # no `c`
        'commands2 = "!a = a + a.item()\\nc\\n"\n',   # right value, gradient 3 instead of 6
        # right values and gradient, but a new `a` computed from x: it does not double the `a` there
        'commands2 = "!a = x * 6\\nc\\n"\n',
    ],
    "03.3": [
        # a snapshot of .grad taken before backward
        "def watch(h):\n    h.retain_grad()\n    return [h.grad]\n",
        # the hook returns a tensor: it replaces the gradient
        ("def watch(h):\n    seen = []\n    def hook(g):\n        seen.append(g)\n        return torch.zeros_like(g)\n"
        "    h.register_hook(hook)\n    return seen\n"),
        # records a summary instead of the gradient
        "def watch(h):\n    seen = []\n    h.register_hook(lambda g: seen.append(g.sum()))\n    return seen\n",
    ],
    "03.4": [
        # the NaN trap
        "def safe_log(x):\n    return torch.where(x > 0, torch.log(x), 0.0)\n",
        # clamping: finite, but the values at 0 are wrong
        "def safe_log(x):\n    return torch.log(x.clamp(min=1e-12))\n",
        # cleans the forward values only; the NaN is in the backward
        "def safe_log(x):\n    return torch.nan_to_num(torch.where(x > 0, torch.log(x), 0.0))\n",
        # finite, but a clamp changes log(x) for a tiny x > 0 (log(1e-20) becomes log(1e-12))
        "def safe_log(x):\n    return torch.where(x > 0, torch.log(x.clamp(min=1e-12)), 0.0)\n",
        # the same with a small number added to x
        "def safe_log(x):\n    return torch.where(x > 0, torch.log(x + 1e-12), 0.0)\n",
    ],
}

RIGHT = {
    "03.1": [
        # a breakpoint in a function the check never calls: pdb keeps tracing, the check must stop it
        'commands1 = "b torch.nn.functional.relu\\np a.item()\\nc\\n"\n',
        'commands1 = "!torch.set_grad_enabled(False)\\np a.item()\\nc\\n"\n',   # grad mode off
        'commands1 = "!torch.set_default_dtype(torch.float64)\\np a.item()\\nc\\n"\n',
    ],
}
