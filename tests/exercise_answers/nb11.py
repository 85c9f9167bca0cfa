"""Plausible wrong answers for 11_mixed_precision_and_the_memory_of_a_step.ipynb's exercises: each
must fail its check. RIGHT lists other correct answers, which the check must accept."""

WRONG = {
    "11.1": [
        # exp_avg and exp_avg_sq only: the step counts forgotten
        "def adam_state_bytes(model):\n    return sum(2 * p.numel() * p.element_size() for p in model.parameters())\n",
        # elements, not bytes
        ("def adam_state_bytes(model):\n"
         "    return sum(2 * p.numel() + 1 for p in model.parameters() if p.requires_grad)\n"),
        # frozen parameters counted
        ("def adam_state_bytes(model):\n"
         "    return sum(2 * p.numel() * p.element_size() + 4 for p in model.parameters())\n"),
        # float32 assumed: 4 bytes an element
        ("def adam_state_bytes(model):\n"
         "    return sum(2 * p.numel() * 4 + 4 for p in model.parameters() if p.requires_grad)\n"),
        # dodges the task: runs Adam on the model itself (its parameters get gradients)
        ("def adam_state_bytes(model):\n    opt = torch.optim.Adam(model.parameters())\n"
         "    model(torch.ones(2, 8, dtype=next(model.parameters()).dtype)).sum().backward()\n    opt.step()\n"
         "    return sum(v.nbytes for s in opt.state.values() for v in s.values())\n"),
    ],
    "11.2": [
        # no scaler.update(): the scale never halves, every step is skipped
        ("def scaled_step(model, x, opt, scaler):\n    opt.zero_grad()\n"
         "    with torch.autocast('cpu', dtype=torch.float16):\n        out = model(x)\n    loss = out.float().pow(2).mean() * 1e-4\n"
         "    scaler.scale(loss).backward()\n    scaler.step(opt)\n"),
        # opt.step() on the scaled gradients: inf steps are not skipped
        ("def scaled_step(model, x, opt, scaler):\n    opt.zero_grad()\n"
         "    with torch.autocast('cpu', dtype=torch.float16):\n        out = model(x)\n    loss = out.float().pow(2).mean() * 1e-4\n"
         "    scaler.scale(loss).backward()\n    opt.step()\n    scaler.update()\n"),
        # the loss in float16: the scaled loss overflows at every step, every step is skipped
        ("def scaled_step(model, x, opt, scaler):\n    opt.zero_grad()\n"
         "    with torch.autocast('cpu', dtype=torch.float16):\n        loss = model(x).pow(2).mean() * 1e-4\n"
         "    scaler.scale(loss).backward()\n    scaler.step(opt)\n    scaler.update()\n"),
        # dodges the task: float32, no scaler at all
        ("def scaled_step(model, x, opt, scaler):\n    opt.zero_grad()\n"
         "    (model(x).pow(2).mean() * 1e-4).backward()\n    opt.step()\n"),
        # unscaled float16 gradients, stepped by hand (underflow: early layers get zeros)
        ("def scaled_step(model, x, opt, scaler):\n    opt.zero_grad()\n"
         "    with torch.autocast('cpu', dtype=torch.float16):\n        out = model(x)\n    loss = out.float().pow(2).mean() * 1e-4\n"
         "    loss.backward()\n    opt.step()\n"),
    ],
    "11.3": [
        # the gradient is used but not freed
        ("def step_in_backward(model, lr):\n    def hook(p):\n        with torch.no_grad():\n"
         "            p.add_(p.grad, alpha=-lr)\n"
         "    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]\n"),
        # the sign: gradient ascent
        ("def step_in_backward(model, lr):\n    def hook(p):\n        with torch.no_grad():\n"
         "            p.add_(p.grad, alpha=lr)\n        p.grad = None\n"
         "    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]\n"),
        # dodges the task: no hooks, nothing stepped
        "def step_in_backward(model, lr):\n    return []\n",
        # the update skipped: gradients freed, parameters unchanged
        ("def step_in_backward(model, lr):\n    def hook(p):\n        p.grad = None\n"
         "    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]\n"),
    ],
}

RIGHT = {
    "11.1": [
        ("def adam_state_bytes(model):\n    total = 0\n    for p in model.parameters():\n"
         "        if p.requires_grad:\n            total += 2 * p.nbytes + torch.tensor(0.0).nbytes\n"
         "    return total\n"),
    ],
    "11.2": [
        ("def scaled_step(model, x, opt, scaler):\n    opt.zero_grad(set_to_none=True)\n"
         "    with torch.autocast(device_type='cpu', dtype=torch.float16):\n        out = model(x)\n"
         "    loss = out.float().pow(2).mean() * 1e-4\n    scaler.scale(loss).backward()\n    scaler.unscale_(opt)\n"
         "    scaler.step(opt)\n    scaler.update()\n    return loss\n"),
    ],
    "11.3": [
        ("def step_in_backward(model, lr):\n    handles = []\n    for p in model.parameters():\n"
         "        def hook(param):\n            param.data -= lr * param.grad\n            param.grad = None\n"
         "        handles.append(p.register_post_accumulate_grad_hook(hook))\n    return handles\n"),
    ],
}
