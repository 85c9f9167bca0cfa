"""Plausible wrong answers for 05_dynamic_depth.ipynb's exercises: each must fail its check."""

# 05.2: the loop with one layer call per row (issue 31, E11)
ROW_BY_ROW = ("def forward_active_rows(model, x, depths):\n    out = []\n    for i in range(len(x)):\n"
              "        out.append(model.forward_one(x[i:i + 1], int(depths[i])))\n    return torch.cat(out)\n")

WRONG = {
    "05.1": [
        # off by one: layer i runs when some depth is > i, so layers from max(depths) on are missed
        "def never_reached(model, depths):\n"
        "    return [f'layers.{i}.{p}' for i in range(int(depths.max()) + 1, len(model.layers))\n"
        "            for p in ('weight', 'bias')]\n",
        # the shallowest sample decides: wrong, one deep sample is enough to reach a layer
        "def never_reached(model, depths):\n"
        "    return [f'layers.{i}.{p}' for i in range(int(depths.min()), len(model.layers))\n"
        "            for p in ('weight', 'bias')]\n",
        # forgets the biases
        "def never_reached(model, depths):\n"
        "    return [f'layers.{i}.weight' for i in range(int(depths.max()), len(model.layers))]\n",
        # asks autograd instead of predicting
        "def never_reached(model, depths):\n"
        "    x = torch.randn(len(depths), model.head.in_features)\n"
        "    model(x, depths).sum().backward()\n"
        "    return [n for n, p in model.named_parameters() if p.grad is None]\n",
        # runs backward on a copy, so the model's own .grad stays None: still not a prediction
        "import copy\n"
        "def never_reached(model, depths):\n"
        "    m = copy.deepcopy(model)\n"
        "    x = torch.randn(len(depths), m.head.in_features)\n"
        "    m(x, depths).sum().backward()\n"
        "    return [n for n, p in m.named_parameters() if p.grad is None]\n",
        # the same through torch.autograd.grad on a copy (allow_unused marks the unreached ones)
        "import copy\n"
        "def never_reached(model, depths):\n"
        "    m = copy.deepcopy(model)\n"
        "    names, params = zip(*m.named_parameters())\n"
        "    out = m(torch.randn(len(depths), m.head.in_features), depths).sum()\n"
        "    grads = torch.autograd.grad(out, params, allow_unused=True)\n"
        "    return [n for n, g in zip(names, grads) if g is None]\n",
        # catches the refusal and answers from the copy's .grad anyway
        "import copy\n"
        "def never_reached(model, depths):\n"
        "    m = copy.deepcopy(model)\n"
        "    try:\n"
        "        m(torch.randn(len(depths), m.head.in_features), depths).sum().backward()\n"
        "    except Exception:\n"
        "        pass\n"
        "    return [f'layers.{i}.{p}' for i in range(int(depths.max()), len(m.layers))\n"
        "            for p in ('weight', 'bias')]\n",
    ],
    "05.2": [
        # torch.where: right values, but every layer runs on every row
        "def forward_active_rows(model, x, depths):\n"
        "    h = x\n"
        "    for i, layer in enumerate(model.layers):\n"
        "        active = (depths > i).to(x.device).unsqueeze(1)\n"
        "        h = torch.where(active, torch.relu(layer(h)), h)\n"
        "    return model.head(h)\n",
        # off by one: depth >= i
        "def forward_active_rows(model, x, depths):\n"
        "    h = x\n"
        "    for i, layer in enumerate(model.layers):\n"
        "        rows = (depths >= i).nonzero().squeeze(1).to(x.device)\n"
        "        h = h.index_copy(0, rows, torch.relu(layer(h[rows])))\n"
        "    return model.head(h)\n",
        # keeps only the active rows: the finished samples disappear
        "def forward_active_rows(model, x, depths):\n"
        "    h = x\n"
        "    for i, layer in enumerate(model.layers):\n"
        "        rows = (depths > i).nonzero().squeeze(1).to(x.device)\n"
        "        h = torch.relu(layer(h[rows]))\n"
        "    return model.head(h)\n",
        # writes through .data: right values, gradients lost
        "def forward_active_rows(model, x, depths):\n"
        "    h = x.clone()\n"
        "    for i, layer in enumerate(model.layers):\n"
        "        rows = (depths > i).nonzero().squeeze(1).to(x.device)\n"
        "        h.data[rows] = torch.relu(layer(h[rows])).data\n"
        "    return model.head(h)\n",
        # torch.where through F.linear: the layers run on every row, and no module hook sees it
        "def forward_active_rows(model, x, depths):\n"
        "    h = x\n"
        "    for i, layer in enumerate(model.layers):\n"
        "        active = (depths > i).to(x.device).unsqueeze(1)\n"
        "        h = torch.where(active, torch.relu(F.linear(h, layer.weight, layer.bias)), h)\n"
        "    return model.head(h)\n",
        # runs each layer on every row, then keeps the active rows' results
        "def forward_active_rows(model, x, depths):\n"
        "    h = x\n"
        "    for i, layer in enumerate(model.layers):\n"
        "        rows = (depths > i).nonzero().squeeze(1)\n"
        "        new = torch.relu(F.linear(h, layer.weight, layer.bias))\n"
        "        h = h.index_copy(0, rows, new[rows])\n"
        "    return model.head(h)\n",
        ROW_BY_ROW,
        # the per-sample loop again, written with F.linear: not batched
        "def forward_active_rows(model, x, depths):\n"
        "    outs = []\n"
        "    for i in range(len(x)):\n"
        "        h = x[i:i + 1]\n"
        "        for layer in model.layers[:int(depths[i])]:\n"
        "            h = torch.relu(F.linear(h, layer.weight, layer.bias))\n"
        "        outs.append(model.head(h))\n"
        "    return torch.cat(outs)\n",
    ],
    "05.3": [
        # forgets the ReLU node of each layer
        "def predicted_nodes(depth):\n    return 4 + 4 * depth\n",
        # forgets the head
        "def predicted_nodes(depth):\n    return 5 * depth\n",
        # as if each layer repeated the whole depth-1 graph
        "def predicted_nodes(depth):\n    return 9 * depth\n",
        # counts by building and drawing a model, which the question rules out
        "def predicted_nodes(depth):\n"
        "    layers = [nn.Linear(2, 2) for _ in range(depth)]\n"
        "    head = nn.Linear(2, 1)\n"
        "    h = torch.ones(1, 2)\n"
        "    for layer in layers:\n"
        "        h = torch.relu(layer(h))\n"
        "    params = {f'p{i}': p for i, p in enumerate(p for m in layers + [head] for p in m.parameters())}\n"
        "    return sum(dg.draw(head(h), params=params).counts().values())\n",
    ],
}
