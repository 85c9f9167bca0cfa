"""Plausible wrong answers for 06_dynamic_attention.ipynb's exercises: each must fail its check."""

WRONG = {
    "06.1": [
        # the anti-pattern: multiply the logits
        "def triple_weights(q, k, importance):\n"
        "    scores = q @ k.T / math.sqrt(q.shape[-1])\n"
        "    return (scores * (1 + 2 * importance)).softmax(dim=-1)\n",
        # adds the factor instead of its log
        "def triple_weights(q, k, importance):\n"
        "    scores = q @ k.T / math.sqrt(q.shape[-1])\n"
        "    return (scores + 3 * importance).softmax(dim=-1)\n",
        # log(3 * importance): drops the unimportant keys
        "def triple_weights(q, k, importance):\n"
        "    scores = q @ k.T / math.sqrt(q.shape[-1])\n"
        "    return (scores + torch.log(3 * importance)).softmax(dim=-1)\n",
        # forgets the 1/sqrt(d) scaling
        "def triple_weights(q, k, importance):\n"
        "    return (q @ k.T + torch.log(1 + 2 * importance)).softmax(dim=-1)\n",
        # the right formula, but exp by hand overflows float32 for scores near 100
        "def triple_weights(q, k, importance):\n"
        "    scores = q @ k.T / math.sqrt(q.shape[-1])\n"
        "    w = (1 + 2 * importance) * scores.exp()\n"
        "    return w / w.sum(dim=-1, keepdim=True)\n",
    ],
    "06.2": [
        # squares but does not renormalise
        "def sharpen(p):\n    return p ** 2\n",
        # renormalises over the whole tensor instead of per row
        "def sharpen(p):\n    return p ** 2 / (p ** 2).sum()\n",
        # softmax of the weights is not softmax of the logits
        "def sharpen(p):\n    return (2 * p).softmax(dim=-1)\n",
    ],
    "06.3": [
        # adds importance itself, not its log
        "def importance_attention(q, k, v, importance):\n"
        "    return F.scaled_dot_product_attention(q, k, v, attn_mask=importance[:, None, None, :])\n",
        # a boolean mask: drops the zeros but ignores the values 2 and 3
        "def importance_attention(q, k, v, importance):\n"
        "    return F.scaled_dot_product_attention(q, k, v, attn_mask=importance.bool()[:, None, None, :])\n",
        # broadcast along the wrong dims
        "def importance_attention(q, k, v, importance):\n"
        "    return F.scaled_dot_product_attention(q, k, v, attn_mask=importance.log()[None, None])\n",
        # right values, but detached
        "def importance_attention(q, k, v, importance):\n"
        "    with torch.no_grad():\n"
        "        return F.scaled_dot_product_attention(q, k, v, attn_mask=importance.log()[:, None, None, :])\n",
        # right values, but a softmax of its own instead of the one SDPA call the question asks for
        "def importance_attention(q, k, v, importance):\n"
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
        "    return (scores + importance.log()[:, None, None, :]).softmax(dim=-1) @ v\n",
        # the same, normalising exp by hand
        "def importance_attention(q, k, v, importance):\n"
        "    w = importance[:, None, None, :] * (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).exp()\n"
        "    return w / w.sum(dim=-1, keepdim=True) @ v\n",
        # one SDPA call for show, but the output is a manual softmax
        "def importance_attention(q, k, v, importance):\n"
        "    F.scaled_dot_product_attention(q, k, v)\n"
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
        "    return torch.softmax(scores + importance.log()[:, None, None, :], dim=-1) @ v\n",
        # an epsilon in the log: the importance-0 keys keep a little weight
        "def importance_attention(q, k, v, importance):\n"
        "    return F.scaled_dot_product_attention(q, k, v, attn_mask=torch.log(importance + 1e-9)[:, None, None, :])\n",
        # one SDPA call for show, and a manual softmax written with ** (no `exp` or `softmax` call)
        "def importance_attention(q, k, v, importance):\n"
        "    F.scaled_dot_product_attention(q, k, v)\n"
        "    w = importance[:, None, None, :] * math.e ** (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))\n"
        "    return w / w.sum(dim=-1, keepdim=True) @ v\n",
    ],
}
