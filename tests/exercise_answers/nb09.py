"""Plausible wrong answers for 09_what_the_graph_keeps_alive.ipynb's exercises: each must fail its check.

RIGHT lists other correct answers, which the check must accept."""

# 09.2: checkpoint_sequential, which runs its last segment without a checkpoint (issue 31, E10)
SEQUENTIAL = "def checkpointed(layers, x):\n    return cp.checkpoint_sequential(layers, 2, x, use_reentrant=False)\n"
# 09.3: pack keeps the float32 original in a closure, and unpack returns it (E5)
ORIGINALS_KEPT = ("def half_hooks():\n    keep = {}\n    def pack(t):\n        h = t.half()\n        keep[id(h)] = t\n"
                  "        return h\n    def unpack(p):\n        return keep[id(p)]\n    return pack, unpack\n")
# 09.3: pack keeps a float32 copy on the side, and unpack returns it
COPIES_KEPT = ORIGINALS_KEPT.replace("keep[id(h)] = t\n", "keep[id(h)] = t.clone()\n")

WRONG = {
    "09.1": [
        # every packed tensor counted, shared storages too
        ("def packed_bytes(fn):\n    sizes = []\n"
         "    def pack(t):\n        sizes.append(t.untyped_storage().nbytes())\n        return t\n"
         "    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):\n        fn()\n"
         "    return sum(sizes)\n"),
        # the view's own bytes, not its storage's
        ("def packed_bytes(fn):\n    seen = {}\n"
         "    def pack(t):\n        seen[t.untyped_storage().data_ptr()] = t.nbytes\n        return t\n"
         "    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):\n        fn()\n"
         "    return sum(seen.values())\n"),
        # the output's size, not what the graph saved
        "def packed_bytes(fn):\n    return fn().untyped_storage().nbytes()\n",
        # dg.draw does the counting: no saved_tensors_hooks at all
        "def packed_bytes(fn):\n    return dg.draw(fn(), memory=True).memory.total\n",
        # identity hooks around fn(), then dg.draw counts: pack sees nothing
        ("def packed_bytes(fn):\n"
         "    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):\n"
         "        out = fn()\n    return dg.draw(out, memory=True).memory.total\n"),
        # leaves skipped: a saved input or parameter is kept by the graph too
        ("def packed_bytes(fn):\n    seen = {}\n"
         "    def pack(t):\n        if not t.is_leaf:\n"
         "            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()\n        return t\n"
         "    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):\n        fn()\n"
         "    return sum(seen.values())\n"),
    ],
    "09.2": [
        # no checkpointing at all
        "def checkpointed(layers, x):\n    return layers(x)\n",
        # each layer checkpointed: every layer's input is still kept
        ("def checkpointed(layers, x):\n    for layer in layers:\n"
         "        x = cp.checkpoint(layer, x, use_reentrant=False)\n    return x\n"),
        # reentrant with an input that does not require grad: no graph at all
        ("def checkpointed(layers, x):\n    h = cp.checkpoint(layers[:3], x, use_reentrant=True)\n"
         "    return cp.checkpoint(layers[3:], h, use_reentrant=True)\n"),
        # one checkpoint around the whole model: little memory, but not two halves
        "def checkpointed(layers, x):\n    return cp.checkpoint(layers, x, use_reentrant=False)\n",
        # a 1 + 5 split: two checkpoints, one activation kept, but not halves
        ("def checkpointed(layers, x):\n    h = cp.checkpoint(layers[:1], x, use_reentrant=False)\n"
         "    return cp.checkpoint(layers[1:], h, use_reentrant=False)\n"),
        # reentrant halves with an input that requires grad: autograd.grad cannot reach the weights
        ("def checkpointed(layers, x):\n    x = x.detach().requires_grad_()\n"
         "    h = cp.checkpoint(layers[:3], x, use_reentrant=True)\n"
         "    return cp.checkpoint(layers[3:], h, use_reentrant=True)\n"),
        # the first half under no_grad: its weights are not in the graph
        ("def checkpointed(layers, x):\n    with torch.no_grad():\n        h = layers[:3](x)\n"
         "    return cp.checkpoint(layers[3:], h, use_reentrant=False)\n"),
        # the first half checkpointed, the second half plain (checkpoint_sequential's last segment)
        ("def checkpointed(layers, x):\n    h = cp.checkpoint(layers[:3], x, use_reentrant=False)\n"
         "    return layers[3:](h)\n"),
        SEQUENTIAL,
        # the first half plain, the second half checkpointed
        ("def checkpointed(layers, x):\n    h = layers[:3](x)\n"
         "    return cp.checkpoint(layers[3:], h, use_reentrant=False)\n"),
    ],
    "09.3": [
        # identity hooks: nothing saved
        "def half_hooks():\n    return (lambda t: t), (lambda t: t)\n",
        # half on the way in, never back: float16 gradients or a dtype error
        "def half_hooks():\n    return (lambda t: t.half()), (lambda p: p)\n",
        # a float32 round trip keeps as much as before
        "def half_hooks():\n    return (lambda t: t.half().float()), (lambda p: p)\n",
        # a list of the right kind but the wrong unpack: zeros
        "def half_hooks():\n    return [lambda t: t.half(), lambda p: torch.zeros_like(p, dtype=torch.float32)]\n",
        # bfloat16, not the float16 the question asks for
        "def half_hooks():\n    return (lambda t: t.bfloat16()), (lambda p: p.float())\n",
        # pack and unpack swapped: pack keeps float32
        "def half_hooks():\n    return (lambda p: p.float()), (lambda t: t.half())\n",
        ORIGINALS_KEPT,
        COPIES_KEPT,
        # the originals kept in a list, though unpack uses the float16 copy
        ("def half_hooks():\n    kept = []\n    def pack(t):\n        kept.append(t)\n        return t.half()\n"
         "    return pack, (lambda p: p.float())\n"),
    ],
}

RIGHT = {
    "09.3": [
        "def half_hooks():\n    return [lambda t: t.to(torch.float16), lambda p: p.to(torch.float32)]\n",
        # the dtype packed with the copy, to restore it
        ("def half_hooks():\n    def pack(t):\n        return t.dtype, t.half()\n"
         "    def unpack(packed):\n        dtype, h = packed\n        return h.to(dtype)\n    return pack, unpack\n"),
    ],
}
