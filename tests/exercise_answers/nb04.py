"""Plausible wrong answers for 04_custom_threshold_relu.ipynb's exercises: each must fail its check."""

_SQUARE = """class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return {}
"""

_LEAKY = """class LeakyThreshold(Function):
    @staticmethod
    def forward(ctx, x, threshold):
        ctx.save_for_backward(x)
        ctx.threshold = threshold
        return torch.where(x > threshold, x, 0.1 * x)

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return {}
"""

_LEAKY2 = """class LeakyThreshold2(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, threshold):
        return torch.where(x > threshold, x, 0.1 * x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward({saved})
        ctx.threshold = inputs[1]

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return torch.where(x > ctx.threshold, grad_output, 0.1 * grad_output), None
"""

# 04.2: a zero tensor as the float threshold's gradient (issue 31, E9)
THRESHOLD_ZERO = _LEAKY.format("torch.where(x > ctx.threshold, grad_output, 0.1 * grad_output), torch.zeros(())")

WRONG = {
    "04.1": [
        _SQUARE.format("2 * x"),                              # ignores grad_output
        _SQUARE.format("x * grad_output"),                    # forgets the 2
        _SQUARE.format("2 * x.detach() * grad_output"),       # right once, wrong second derivative
        _SQUARE.format("2 * x.data * grad_output"),           # the same with .data
        _SQUARE.format("(2 * x * grad_output).float()"),      # a float32 copy: second derivatives off
        _SQUARE.format("2 * grad_output"),                    # forgets x
        "def Square(x):\n    return x * x\n",              # the wrong kind: a function, not a Function subclass
    ],
    "04.2": [
        _LEAKY.format("torch.where(x > ctx.threshold, grad_output, 0.0), None"),   # ThresholdReLU's backward
        _LEAKY.format("torch.where(x > ctx.threshold, 1.0, 0.1), None"),           # ignores grad_output
        _LEAKY.format("torch.where(x > ctx.threshold, grad_output, 0.1 * grad_output)"),  # no None
        _LEAKY.format("torch.where(x > 5.0, grad_output, 0.1 * grad_output), None"),  # the threshold typed in
        _LEAKY.format("torch.where(x > ctx.threshold, grad_output, 0.1), None"),  # below: 0.1, not 0.1 * grad_output
        THRESHOLD_ZERO,   # a zero tensor for the float threshold: PyTorch refuses it
        _LEAKY.format("torch.where(x > ctx.threshold, grad_output, 0.1 * grad_output), 0.0"),  # a zero float
        # the wrong kind: a plain function, not a Function subclass (the hint names the kind)
        "def LeakyThreshold(x, threshold):\n    return torch.where(x > threshold, x, 0.1 * x)\n",
    ],
    "04.3": [
        # the old style: forward takes ctx, no setup_context
        _LEAKY.format("torch.where(x > ctx.threshold, grad_output, 0.1 * grad_output), None")
        .replace("class LeakyThreshold(", "class LeakyThreshold2("),
        # no batching rule for vmap
        _LEAKY2.format(saved="inputs[0]").replace("    generate_vmap_rule = True\n", ""),
        # saves the output: wrong wherever 0.1 * x lands above the threshold (t < 0)
        _LEAKY2.format(saved="output"),
        # no gradient for the threshold
        _LEAKY2.format(saved="inputs[0]").replace("0.1 * grad_output), None", "0.1 * grad_output)"),
        # ignores grad_output: right only when the upstream gradient is all ones
        _LEAKY2.format(saved="inputs[0]").replace("grad_output, 0.1 * grad_output)", "1.0, 0.1)"),
        # 0.1 below the threshold instead of 0.1 * grad_output
        _LEAKY2.format(saved="inputs[0]").replace("0.1 * grad_output)", "0.1)"),
        # a zero tensor for the float threshold
        _LEAKY2.format(saved="inputs[0]").replace("0.1 * grad_output), None", "0.1 * grad_output), torch.zeros(())"),
        # the slopes swapped
        _LEAKY2.format(saved="inputs[0]").replace("grad_output, 0.1 * grad_output)", "0.1 * grad_output, grad_output)"),
        # the wrong kind: the forward's function, not a Function subclass
        "LeakyThreshold2 = torch.nn.functional.leaky_relu\n",
    ],
}
