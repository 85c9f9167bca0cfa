"""Plausible wrong answers for 01_simple_backward.ipynb's exercises: each must fail its check."""

WRONG = {
    "01.4": [
        # recorded update: w becomes a non-leaf
        "def sgd_step(w, lr):\n    w = w - lr * w.grad\n    return w\n",
        # right update, gradient left in place
        "def sgd_step(w, lr):\n    with torch.no_grad():\n        w -= lr * w.grad\n",
        # wrong sign
        "def sgd_step(w, lr):\n    with torch.no_grad():\n        w += lr * w.grad\n    w.grad = None\n",
        # out of place under no_grad: new memory
        "def sgd_step(w, lr):\n    with torch.no_grad():\n        w.data = w - lr * w.grad\n    w.grad = None\n",
    ],
}
