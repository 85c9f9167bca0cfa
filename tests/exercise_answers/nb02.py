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
    ],
}
