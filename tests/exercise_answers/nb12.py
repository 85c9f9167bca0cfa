"""Plausible wrong answers for 12_ddp_autograd_hooks.ipynb's exercises: each must fail its check.

RIGHT lists other correct answers, which the check must accept."""

# 12.1: the notebook's solution, with one thing changed in each wrong answer below
SPLIT = ("def ddp_gradient(model, x, y, world):\n    per_rank = []\n"
         "    for xs, ys in zip(x.chunk(world), y.chunk(world)):\n"
         "        loss = (model(xs) - ys).pow(2).mean()\n"
         "        per_rank.append(torch.autograd.grad(loss, list(model.parameters())))\n"
         "    names = [n for n, _ in model.named_parameters()]\n"
         "    return {n: sum(gs) / world for n, *gs in zip(names, *per_rank)}\n")
# 12.3: the notebook's solution
NO_SYNC = ("def accumulate(model, batches):\n    *first, (x_last, y_last) = batches\n"
           "    with model.no_sync():\n        for x, y in first:\n"
           "            ((model(x) - y).pow(2).mean() / len(batches)).backward()\n"
           "    ((model(x_last) - y_last).pow(2).mean() / len(batches)).backward()\n")

WRONG = {
    "12.1": [
        # all-reduce read as a sum: the ranks' gradients added, not averaged
        SPLIT.replace("sum(gs) / world", "sum(gs)"),
        # rank 0's own gradient, as if there were no all-reduce
        SPLIT.replace("sum(gs) / world", "gs[0]"),
        # each rank's loss summed over its rows, not averaged
        SPLIT.replace(".pow(2).mean()", ".pow(2).sum()"),
        # dodges the task: the whole batch in one go, no split into ranks
        ("def ddp_gradient(model, x, y, world):\n"
         "    grads = torch.autograd.grad((model(x) - y).pow(2).mean(), list(model.parameters()))\n"
         "    return {n: g for (n, _), g in zip(model.named_parameters(), grads)}\n"),
    ],
    "12.2": [
        # every node run after the launch, AccumulateGrad too
        ("def overlapped(trace):\n"
         "    return {b.bucket: len(trace.order) - 1 - b.after for b in trace.launches}\n"),
        # the op nodes that ran before the launch
        ("def overlapped(trace):\n    return {b.bucket: sum(trace.nodes[i].kind == 'op' "
         "for i in trace.order[:b.after]) for b in trace.launches}\n"),
        # a list by launch, not a dict by bucket
        ("def overlapped(trace):\n    return [sum(trace.nodes[i].kind == 'op' "
         "for i in trace.order[b.after + 1:]) for b in trace.launches]\n"),
        # dodges the task: the lesson's own numbers typed in
        "def overlapped(trace):\n    return {0: 1, 1: 0}\n",
    ],
    "12.3": [
        # no no_sync(): every micro-batch's backward launches an all-reduce
        NO_SYNC.replace("    with model.no_sync():\n        for x, y in first:\n            ",
                        "    for x, y in first:\n        "),
        # every micro-batch under no_sync(): the ranks never exchange gradients
        ("def accumulate(model, batches):\n    with model.no_sync():\n        for x, y in batches:\n"
         "            ((model(x) - y).pow(2).mean() / len(batches)).backward()\n"),
        # the losses not divided: .grad is the sum of the micro-batches' gradients
        NO_SYNC.replace(" / len(batches)", ""),
        # forward outside no_sync(), only backward inside: DDP decides in forward, so it syncs
        ("def accumulate(model, batches):\n    for k, (x, y) in enumerate(batches):\n"
         "        loss = (model(x) - y).pow(2).mean() / len(batches)\n"
         "        if k < len(batches) - 1:\n            with model.no_sync():\n                loss.backward()\n"
         "        else:\n            loss.backward()\n"),
        # one summed loss, one backward: right gradients and one all-reduce, but no accumulation
        ("def accumulate(model, batches):\n"
         "    loss = sum((model(x) - y).pow(2).mean() for x, y in batches) / len(batches)\n"
         "    loss.backward()\n"),
        # dodges the task: gradients written into .grad by hand, no backward through DDP
        ("def accumulate(model, batches):\n    params = list(model.module.parameters())\n"
         "    for x, y in batches:\n        loss = (model(x) - y).pow(2).mean() / len(batches)\n"
         "        for p, g in zip(params, torch.autograd.grad(loss, params)):\n"
         "            p.grad = g if p.grad is None else p.grad + g\n"),
    ],
}

RIGHT = {
    "12.1": [
        # backward() adds each rank's share into .grad
        ("def ddp_gradient(model, x, y, world):\n    model.zero_grad()\n    rows = len(x) // world\n"
         "    for xs, ys in zip(x.split(rows), y.split(rows)):\n"
         "        ((model(xs) - ys).pow(2).mean() / world).backward()\n"
         "    return {n: p.grad.clone() for n, p in model.named_parameters()}\n"),
    ],
    "12.2": [
        ("def overlapped(trace):\n    kind = {n.id: n.kind for n in trace.nodes}\n    counts = {}\n"
         "    for launch in trace.launches:\n        later = trace.order[launch.after + 1:]\n"
         "        counts[launch.bucket] = len([i for i in later if kind[i] == 'op'])\n    return counts\n"),
    ],
    "12.3": [
        ("def accumulate(model, batches):\n    import contextlib\n    for k, (x, y) in enumerate(batches):\n"
         "        last = k == len(batches) - 1\n"
         "        with contextlib.nullcontext() if last else model.no_sync():\n"
         "            loss = (model(x) - y).pow(2).mean()\n            (loss / len(batches)).backward()\n"),
    ],
}
