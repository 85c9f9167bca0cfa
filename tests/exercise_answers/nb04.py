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

_MUL = """class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return {}
"""

WRONG = {
    "04.1": [
        _SQUARE.format("2 * x"),                              # ignores grad_output
        _SQUARE.format("x * grad_output"),                    # forgets the 2
        _SQUARE.format("2 * x.detach() * grad_output"),       # right once, wrong second derivative
    ],
    "04.2": [
        _LEAKY.format("torch.where(x > ctx.threshold, grad_output, 0.0), None"),   # ThresholdReLU's backward
        _LEAKY.format("torch.where(x > ctx.threshold, 1.0, 0.1), None"),           # ignores grad_output
        _LEAKY.format("torch.where(x > ctx.threshold, grad_output, 0.1 * grad_output)"),  # no None
    ],
    "04.3": [
        # the old style: forward takes ctx, no setup_context
        _LEAKY.format("torch.where(x > ctx.threshold, grad_output, 0.1 * grad_output), None")
        .replace("class LeakyThreshold(", "class LeakyThreshold2("),
        # no batching rule for vmap
        _LEAKY2.format(saved="inputs[0]").replace("    generate_vmap_rule = True\n", ""),
        # saves the output: wrong wherever 0.1 * x lands above the threshold (t < 0)
        _LEAKY2.format(saved="output"),
    ],
    "04.4": [
        _MUL.format("grad_output * b, grad_output * a"),       # always computes both
        _MUL.format("grad_output * a, grad_output * b"),       # swapped
        _MUL.format("grad_output * b if ctx.needs_input_grad[0] else None, None"),  # never for b
    ],
}
