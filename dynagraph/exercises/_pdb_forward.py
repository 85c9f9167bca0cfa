"""The function that exercises 03.1 and 03.2 stop in: the notebook's `forward`, as it is there.

pdb shows the learner this file: `a` (args) lists the function's parameters, `l` (list) its lines.
"""
# mypy: allow-untyped-defs


def forward(x, debugger):
    a = x * 3
    debugger.set_trace()
    b = a + 1
    return b
