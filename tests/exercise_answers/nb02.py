"""Plausible wrong answers for 02_variable_length_rnn.ipynb's exercises: each must fail its check."""

WRONG = {
    "02.1": [
        # the last padded step
        "def last_outputs(out, lengths):\n    return out[:, -1]\n",
        # off by one: step `length` is past the end (or padding)
        "def last_outputs(out, lengths):\n    return out[torch.arange(len(lengths)), lengths]\n",
        # indexes time for every row at once: (batch, batch, hidden)
        "def last_outputs(out, lengths):\n    return out[:, lengths - 1]\n",
    ],
    "02.2": [
        # forgets the shared parameters
        "def predicted_nodes(n):\n    return 6 * n\n",
        # scales the whole length-1 graph
        "def predicted_nodes(n):\n    return 10 * n\n",
        # adds n steps to the length-2 total
        "def predicted_nodes(n):\n    return 16 + 6 * n\n",
        # right numbers, but it builds and draws a graph: the question says predict, without drawing
        ("def predicted_nodes(n):\n    cell = nn.RNNCell(1, 2)\n    h = torch.zeros(1, 2)\n"
         "    for _ in range(n):\n        h = cell(torch.ones(1, 1), h)\n"
         "    return sum(dg.draw(h).counts().values())\n"),
        # builds and draws the graph under enable_grad(): it escapes no_grad, but still draws
        ("def predicted_nodes(n):\n    with torch.enable_grad():\n        cell = nn.RNNCell(1, 2)\n"
         "        h = torch.zeros(1, 2)\n        for _ in range(n):\n            h = cell(torch.ones(1, 1), h)\n"
         "        return dg.draw(h).counts().total()\n"),
        # counts drawn ahead of time for the lengths up to 12: no rule for longer sequences
        ("_cell = nn.RNNCell(1, 2)\n_counts = {}\nfor _n in range(1, 13):\n    _h = torch.zeros(1, 2)\n"
         "    for _ in range(_n):\n        _h = _cell(torch.ones(1, 1), _h)\n"
         "    _counts[_n] = dg.draw(_h).counts().total()\n"
         "def predicted_nodes(n):\n    return _counts[n]\n"),
        # a table of the three lengths the notebook drew
        "def predicted_nodes(n):\n    return {1: 10, 2: 16, 5: 34}[n]\n",
    ],
    "02.3": [
        # no packing: reads the padding
        "def final_states(rnn, x, lengths):\n    return rnn(x)[1][-1]\n",
        # the bottom layer
        ("def final_states(rnn, x, lengths):\n"
        "    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)\n"
        "    return rnn(packed)[1][0]\n"),
        # enforce_sorted left at True with unsorted lengths
        ("def final_states(rnn, x, lengths):\n"
        "    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)\n"
        "    return rnn(packed)[1][-1]\n"),
        # every layer, squeezed: (num_layers, batch, hidden) for a deep RNN
        ("def final_states(rnn, x, lengths):\n"
        "    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)\n"
        "    return rnn(packed)[1].squeeze(0)\n"),
        # the per-sequence loop: right numbers, one call per sequence
        ("def final_states(rnn, x, lengths):\n"
        "    return torch.stack([rnn(x[i:i + 1, :n])[1][-1, 0] for i, n in enumerate(lengths.tolist())])\n"),
        # guesses the lengths from the values: a real step that is all zeros counts as padding
        ("def final_states(rnn, x, lengths):\n    lengths = (x.abs().sum(-1) > 0).sum(1)\n"
        "    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)\n"
        "    return rnn(packed)[1][-1]\n"),
        # guesses each length from the last step that is not all zeros
        ("def final_states(rnn, x, lengths):\n    nz = x.abs().sum(-1) > 0\n"
        "    lengths = x.shape[1] - nz.flip(1).int().argmax(1)\n"
        "    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)\n"
        "    return rnn(packed)[1][-1]\n"),
        # right values, detached: no gradient reaches the RNN's weights
        ("def final_states(rnn, x, lengths):\n"
        "    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)\n"
        "    return rnn(packed)[1][-1].detach()\n"),
        # right values under no_grad(): no gradient either
        ("def final_states(rnn, x, lengths):\n    with torch.no_grad():\n"
        "        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)\n"
        "        return rnn(packed)[1][-1]\n"),
        # sorts the batch by hand for enforce_sorted=True, but never puts the rows back
        ("def final_states(rnn, x, lengths):\n    order = lengths.argsort(descending=True)\n"
        "    packed = nn.utils.rnn.pack_padded_sequence(x[order], lengths[order], batch_first=True)\n"
        "    return rnn(packed)[1][-1]\n"),
        # forgets batch_first=True: packing reads x as (time, batch, features)
        ("def final_states(rnn, x, lengths):\n"
        "    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)\n"
        "    return rnn(packed)[1][-1]\n"),
        # the last padded step of the padded outputs: zeros for every shorter sequence
        ("def final_states(rnn, x, lengths):\n"
        "    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)\n"
        "    out, _ = nn.utils.rnn.pad_packed_sequence(rnn(packed)[0], batch_first=True)\n"
        "    return out[:, -1]\n"),
    ],
    "02.4": [
        # no mask: steps through the padding
        ("def run_cell_masked(cell, x, lengths):\n    h = torch.zeros(x.shape[0], cell.hidden_size)\n"
        "    for t in range(x.shape[1]):\n        h = cell(x[:, t], h)\n    return h\n"),
        # off by one: keeps running one step into the padding
        ("def run_cell_masked(cell, x, lengths):\n    h = torch.zeros(x.shape[0], cell.hidden_size)\n"
        "    for t in range(x.shape[1]):\n        h = torch.where((t <= lengths)[:, None], cell(x[:, t], h), h)\n    return h\n"),
        # multiplies by the mask: finished sequences are zeroed, not kept
        ("def run_cell_masked(cell, x, lengths):\n    h = torch.zeros(x.shape[0], cell.hidden_size)\n"
        "    for t in range(x.shape[1]):\n        h = cell(x[:, t], h) * (t < lengths)[:, None]\n    return h\n"),
        # keeps the state of a finished sequence but detaches it: no gradient flows through it
        ("def run_cell_masked(cell, x, lengths):\n    h = torch.zeros(x.shape[0], cell.hidden_size)\n"
        "    for t in range(x.shape[1]):\n"
        "        h = torch.where((t < lengths)[:, None], cell(x[:, t], h), h.detach())\n    return h\n"),
        # the per-sequence loop: right numbers, one call per step of every sequence
        ("def run_cell_masked(cell, x, lengths):\n    finals = []\n    for i, n in enumerate(lengths.tolist()):\n"
        "        h = torch.zeros(1, cell.hidden_size)\n        for t in range(n):\n            h = cell(x[i:i + 1, t], h)\n"
        "        finals.append(h[0])\n    return torch.stack(finals)\n"),
        # guesses from the values which steps are real: a real step of zeros freezes the state
        ("def run_cell_masked(cell, x, lengths):\n    h = torch.zeros(x.shape[0], cell.hidden_size)\n"
        "    for t in range(x.shape[1]):\n        alive = x[:, t].abs().sum(1) > 0\n"
        "        h = torch.where(alive[:, None], cell(x[:, t], h), h)\n    return h\n"),
        # right values, detached at the end: no parameter gradient
        ("def run_cell_masked(cell, x, lengths):\n    h = torch.zeros(x.shape[0], cell.hidden_size)\n"
        "    for t in range(x.shape[1]):\n        h = torch.where((t < lengths)[:, None], cell(x[:, t], h), h)\n"
        "    return h.detach()\n"),
        # off by one the other way: stops one step early, a length-1 sequence never moves
        ("def run_cell_masked(cell, x, lengths):\n    h = torch.zeros(x.shape[0], cell.hidden_size)\n"
        "    for t in range(x.shape[1]):\n        h = torch.where((t < lengths - 1)[:, None], cell(x[:, t], h), h)\n"
        "    return h\n"),
        # updates only the running rows: right values, but not one call on the whole batch
        ("def run_cell_masked(cell, x, lengths):\n    h = torch.zeros(x.shape[0], cell.hidden_size)\n"
        "    for t in range(x.shape[1]):\n        alive = t < lengths\n        h = h.clone()\n"
        "        h[alive] = cell(x[alive, t], h[alive])\n    return h\n"),
    ],
}
