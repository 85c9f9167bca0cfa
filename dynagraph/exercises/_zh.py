"""Chinese translations of the exercise checks' verdicts and hints (see :mod:`dynagraph._language`).

Keys are the English messages exactly as the checks pass them to ``tr`` (or mark with ``N_``:
titles, kinds of answer, case names); names in braces stay as they are. ``tests/test_language.py``
checks that every message has one entry here and every entry a message.

Terms follow the Chinese column of ``notebooks/glossary.md`` (d2l-zh's usage); code names and
anything in backticks stay in English. Quoted text from Python or PyTorch (an exception's
message) is put in “…”: it stays in English, as the code prints it.
"""
# ruff: noqa: E501 - one message per line, so that grep on a check's English text finds its entry

MESSAGES: dict[str, str] = {
    # __init__.py
    "a function":
        "一个函数",
    "a class":
        "一个类",
    "a subclass of torch.autograd.Function, with forward and backward staticmethods":
        "一个带有 `forward` 和 `backward` 静态方法的 torch.autograd.Function 子类",
    "a string of pdb commands, one command per line":
        "一个每行一条 pdb 命令的字符串",
    "Exercise {number}":
        "练习 {number}",
    "⏳ {label}: not done yet. Fill in `{answer}` in the cell above, then run this cell again.":
        "⏳ {label}：尚未完成。请在上面的单元格中填写 `{answer}`，然后再次运行本单元格。",
    "✗ {label}: not right yet. {hint}{code_hint}":
        "✗ {label}：还不对。{hint}{code_hint}",
    "✗ {label}: not right yet. Your answer raised {error}: {message}":
        "✗ {label}：还不对。你的答案抛出了 {error}：“{message}”",
    "✓ {label} solved: {title}.":
        "✓ {label} 已解决：{title}。",
    " (Try again. If it is still wrong, the check shows a code hint.)":
        "（再试一次。如果仍然不对，检查会给出代码提示。）",
    " Code hint: {code}":
        "代码提示：{code}",
    " (Try again. If it is still wrong, the check shows another hint.)":
        "（再试一次。如果仍然不对，检查会再给一条提示。）",
    " Another hint: {further} (If it is still wrong, the check shows a code hint.)":
        "再给一条提示：{further}（如果仍然不对，检查会给出代码提示。）",
    "{key} wants {wants}; got {got}. Write `{how}` in the cell above, run it, then run this cell again.":
        "{key} 需要{wants}，但得到的是{got}。请在上面的单元格中写出 `{how}` 并运行，然后再次运行本单元格。",
    "a subclass of torch.autograd.Function (`{name}`)":
        "一个 torch.autograd.Function 的子类（`{name}`）",
    "a class (`{name}`)":
        "一个类（`{name}`）",
    "a function (`{name}`)":
        "一个函数（`{name}`）",
    "a tensor":
        "一个张量",
    "a string":
        "一个字符串",
    "an {name}":
        "一个 {name} 对象",
    "a {name}":
        "一个 {name} 对象",
    # nb01.py
    "`f` ran on `xs` itself, so your answer made the caller's tensor require grad, even if only for a while. Leave `xs` as it is: make your own leaf, a copy of `xs` that requires grad, and call `f` on that.":
        "`f` 直接作用在了 `xs` 上，所以你的答案让调用者的张量需要梯度，哪怕只是暂时的。请保持 `xs` 不变：自己创建一个叶子张量，即 `xs` 的一个需要梯度的副本，再对它调用 `f`。",
    "`f` ran inside a `torch.func` transform (`vmap`, `grad`, `jacrev`). This exercise is about the graph that autograd records: call f on a leaf that holds all the points, then run one backward pass (section 4).":
        "`f` 是在 `torch.func` 变换（`vmap`、`grad`、`jacrev`）中运行的。本练习关注的是自动微分记录下的计算图：在一个包含所有点的叶子张量上调用 `f`，然后运行一次反向传播（第 4 节）。",
    "`f` was called {times}, on inputs of shape {shapes}, but `xs` has shape {shape}. Call f once, on one leaf that holds all the points: one graph gives every derivative.":
        "`f` 被调用了 {times}，输入的形状为 {shapes}，但 `xs` 的形状是 {shape}。请只调用 `f` 一次，作用在一个包含所有点的叶子张量上：一个计算图就能给出所有导数。",
    "{n} time":
        "{n} 次",
    "{n} times":
        "{n} 次",
    "A batched backward pass (`vectorize=True`, `is_grads_batched=True`) computes a whole Jacobian, one row per output. For an elementwise f one plain pass is enough: weight every output by 1 (section 4).":
        "批量化的反向传播（`vectorize=True`、`is_grads_batched=True`）会计算整个雅可比矩阵，每个输出一行。对于逐元素的 `f`，一次普通的反向传播就够了：给每个输出的权重都取 1（第 4 节）。",
    "Your answer ran {passes} for {points}. One pass gives the derivative at every point of an elementwise f: weight every output by 1 with `gradient=` (section 4).":
        "对于 {points}，你的答案运行了 {passes}。对于逐元素的 `f`，一次反向传播就能给出每个点上的导数：用 `gradient=` 给每个输出的权重都取 1（第 4 节）。",
    "{n} backward pass":
        "{n} 次反向传播",
    "{n} backward passes":
        "{n} 次反向传播",
    "{n} point":
        "{n} 个点",
    "{n} points":
        "{n} 个点",
    "one leaf `x` that holds all the points, `y = f(x)`, then a single `y.backward(gradient=...)`: which weight does each point need?":
        "一个包含所有点的叶子张量 `x`，`y = f(x)`，然后只调用一次 `y.backward(gradient=...)`：每个点需要什么权重？",
    "the derivative of an elementwise function at many points, with one backward pass":
        "用一次反向传播求逐元素函数在多个点上的导数",
    "`backward()` without an argument works only for a scalar output. Here `f(x)` has one value per point: give backward a weight for each output, with `gradient=` (section 4).":
        "不带参数的 `backward()` 只适用于标量输出。这里 `f(x)` 在每个点上都有一个值：请用 `gradient=` 为每个输出指定一个权重（第 4 节）。",
    "`y.backward(gradient=...)`, where `...` has the shape of `y` and the same weight for every point: which weight?":
        "`y.backward(gradient=...)`，其中 `...` 的形状与 `y` 相同，且每个点的权重都一样：应该取什么权重？",
    "Your function changed the caller's tensor (`requires_grad_` or `.grad` on `xs` itself). Leave `xs` as it is: make your own leaf, a copy of `xs` that requires grad.":
        "你的函数改变了调用者的张量（直接对 `xs` 使用了 `requires_grad_` 或 `.grad`）。请保持 `xs` 不变：自己创建一个叶子张量，即 `xs` 的一个需要梯度的副本。",
    "Return a tensor of shape {shape} (one derivative per point), got {type} {got_shape}.":
        "请返回形状为 {shape} 的张量（每个点一个导数），得到的却是 {type} {got_shape}。",
    "The result still carries a graph (`grad_fn`): return the leaf's `.grad`.":
        "结果仍然带着计算图（`grad_fn`）：请返回叶子张量的 `.grad`。",
    "At x = {points} the derivative is {want}, you got {got}: close, not exact. Finite differences are an approximation; let `backward()` compute the derivative.":
        "在 x = {points} 处，导数是 {want}，你得到的是 {got}：接近，但不精确。有限差分只是近似；请让 `backward()` 来计算导数。",
    "At x = {points} the derivative is {want}, you got {got}. `gradient=` weights each output (it is v in v·J): for the plain derivative every weight is 1 (section 4).":
        "在 x = {points} 处，导数是 {want}，你得到的是 {got}。`gradient=` 为每个输出加权（它就是 v·J 中的 v）：求普通的导数时，每个权重都是 1（第 4 节）。",
    "Return a plain tensor, not one that requires grad.":
        "请返回普通张量，而不是需要梯度的张量。",
    "Your function called dynagraph (`{name}`), which walks the graph for you. The exercise is to write the walk yourself: start at `t.grad_fn` and follow each node's `next_functions`.":
        "你的函数调用了 dynagraph（`{name}`），它会替你遍历计算图。这个练习要你自己写出遍历：从 `t.grad_fn` 开始，沿着每个节点的 `next_functions` 走。",
    "a walk over grad_fn and next_functions that counts every node once":
        "沿 `grad_fn` 和 `next_functions` 遍历计算图，每个节点只计一次",
    "For `{code}` your function returned {got}, then {again} for the same graph: something carries over from one call to the next. Make the set of seen nodes inside the function, new for each call.":
        "对于 `{code}`，你的函数先返回 {got}，对同一个计算图又返回 {again}：有东西从一次调用带到了下一次调用。请在函数内部创建记录已访问节点的集合，每次调用都新建一个。",
    "Return the number of nodes as an int, got {type}.":
        "请以 int 返回节点数，得到的却是 {type}。",
    "For `{code}` you counted {got} nodes, but the graph has {want}: a node that two paths reach was counted once per path. This happens to any node whose result is used twice, an operation's node as well as a leaf's `AccumulateGrad`. Keep a set of all the nodes already seen.":
        "对于 `{code}`，你数出 {got} 个节点，但计算图有 {want} 个：一个能经两条路径到达的节点，每条路径都计了一次。结果被使用两次的任何节点都会这样，无论是操作的节点还是叶子张量的 `AccumulateGrad`。请用一个集合记下所有已访问的节点。",
    "For `{code}` you counted {got} nodes, but the graph has {want}: your walk follows only the first entry of each node's `next_functions`. A node has one entry for each input of its operation. Follow every entry, and skip only the `None` entries (inputs that need no gradient).":
        "对于 `{code}`，你数出 {got} 个节点，但计算图有 {want} 个：你的遍历只沿着每个节点 `next_functions` 的第一个条目走。操作的每个输入在节点中都有一个条目。请沿着每一个条目走，只跳过 `None` 条目（不需要梯度的输入）。",
    "For `{code}` you counted {got} nodes, but the graph has {want}: the leaves' `AccumulateGrad` nodes count too (they appear in `next_functions`).":
        "对于 `{code}`，你数出 {got} 个节点，但计算图有 {want} 个：叶子张量的 `AccumulateGrad` 节点也要计入（它们出现在 `next_functions` 中）。",
    "For `{code}` you counted {got} nodes, but the graph has {want}. Follow *every* entry of `next_functions` (not only the first), skip the `None` entries (inputs that need no gradient), and count each node once, also an operation's node that two paths reach.":
        "对于 `{code}`，你数出 {got} 个节点，但计算图有 {want} 个。请沿着 `next_functions` 的*每一个*条目走（不只是第一个），跳过 `None` 条目（不需要梯度的输入），并且每个节点只计一次，两条路径都能到达的操作节点也是如此。",
    "the gradient that reaches an intermediate tensor, kept with retain_grad()":
        "用 `retain_grad()` 保留到达中间张量的梯度",
    "You returned `None`: `h` is not a leaf, so `backward()` does not keep its `.grad`. Call `h.retain_grad()` *before* `backward()` (section 5).":
        "你返回了 `None`：`h` 不是叶子张量，所以 `backward()` 不会保留它的 `.grad`。请在 `backward()` *之前*调用 `h.retain_grad()`（第 5 节）。",
    " PyTorch warned you about it.":
        "PyTorch 已经对此发出了警告。",
    "Return dy/dh, a tensor of shape {shape}.":
        "请返回 dy/dh，一个形状为 {shape} 的张量。",
    "`x.grad` was not filled. `y.backward()` fills the leaves' `.grad` (`torch.autograd.grad` does not), and only when `h` is computed from `x` itself, not from a detached copy.":
        "`x.grad` 没有被填充。`y.backward()` 会填充叶子张量的 `.grad`（`torch.autograd.grad` 不会），而且只有当 `h` 由 `x` 本身计算得到、而不是由分离出的副本计算得到时才会。",
    "At x = {start} you got {got}, twice dy/dh = {want}: gradients accumulate, so call `backward()` only once.":
        "在 x = {start} 处，你得到 {got}，是 dy/dh = {want} 的两倍：梯度会累加，所以只能调用一次 `backward()`。",
    "At x = {start}, dy/dh should be 2h = {want}, got {got}. Return the gradient that reached `h` (`h.grad`), not `x.grad`.":
        "在 x = {start} 处，dy/dh 应为 2h = {want}，得到的却是 {got}。请返回到达 `h` 的梯度（`h.grad`），而不是 `x.grad`。",
    "After one backward(), x.grad should be dy/dx = 4x^3 = {want}, got {got}.":
        "调用一次 `backward()` 后，`x.grad` 应为 dy/dx = 4x^3 = {want}，得到的却是 {got}。",
    "Return a plain tensor (`h.grad`), not one with a graph.":
        "请返回普通张量（`h.grad`），而不是带计算图的张量。",
    "The value is right, but it is not the gradient that `retain_grad()` kept: return `h.grad` itself. The exercise is to let backward() compute dy/dh and keep it on `h` with `retain_grad()`: not to catch it with a hook, nor to work it out by hand.":
        "值是对的，但它不是 `retain_grad()` 保留下来的梯度：请直接返回 `h.grad`。这个练习要你让 `backward()` 计算 dy/dh，并用 `retain_grad()` 把它保留在 `h` 上：不是用钩子截获它，也不是手工算出来。",
    "an SGD step that updates the leaf in place, unrecorded, and clears its gradient":
        "原地、不被记录地更新叶子张量并清除其梯度的一步 SGD",
    "PyTorch refused the in-place change: `w` is a leaf that requires grad, and autograd was recording. Make the update where nothing is recorded (section 8).":
        "PyTorch 拒绝了这次原地修改：`w` 是需要梯度的叶子张量，而当时自动微分正在记录。请在不记录任何操作的地方进行更新（第 8 节）。",
    "Update `w` itself; `sgd_step` should not build and return a new tensor.":
        "请更新 `w` 本身；`sgd_step` 不应构造并返回一个新张量。",
    "`w` is no longer a leaf: the update was recorded. Do it under `torch.no_grad()`.":
        "`w` 不再是叶子张量：这次更新被记录了。请在 `torch.no_grad()` 下进行更新。",
    "`w` points at new memory: change the numbers inside `w` in place, so that it stays the same tensor.":
        "`w` 指向了新的内存：请原地修改 `w` 中的数值，使它仍是同一个张量。",
    "`w -= ...` or `w.sub_(...)`, under `torch.no_grad()`":
        "在 `torch.no_grad()` 下使用 `w -= ...` 或 `w.sub_(...)`",
    "`w` no longer requires grad; keep it a trainable leaf.":
        "`w` 不再需要梯度；请让它保持为可训练的叶子张量。",
    "With lr={lr}, w should become {want}, got {got}: step against the gradient, w - lr * w.grad.":
        "当 lr={lr} 时，`w` 应变为 {want}，得到的却是 {got}：请沿梯度的反方向走一步，即 `w - lr * w.grad`。",
    "`w` changed, but its version counter (`w._version`) did not: the update went through `.data`, which autograd cannot see. If a graph had saved `w`, its backward would silently use the new value. Change `w` itself, in place, under `torch.no_grad()`: that bumps `w._version` (section 8).":
        "`w` 变了，但它的版本计数器（`w._version`）没有变：更新是通过 `.data` 进行的，自动微分看不到。如果某个计算图保存了 `w`，它的反向传播会悄悄地使用新值。请在 `torch.no_grad()` 下原地修改 `w` 本身：这样会增加 `w._version`（第 8 节）。",
    "`w.grad` still holds the old gradient: clear it, or the next backward adds to it.":
        "`w.grad` 仍然保存着旧的梯度：请清除它，否则下一次反向传播会累加到它上面。",
    "a scalar autograd engine whose backward() runs the nodes in reverse topological order":
        "一个标量自动微分引擎，其 `backward()` 按拓扑序的逆序运行各节点",
    "After `out.backward()`, `out.grad` should be 1 (d out / d out), it is {grad}. Seed the output's own gradient before any `_backward` runs.":
        "调用 `out.backward()` 后，`out.grad` 应为 1（d out / d out），实际是 {grad}。请在任何 `_backward` 运行之前，先设定输出自身的梯度。",
    "backward() changed `.data`; it should only fill `.grad`.":
        "`backward()` 改变了 `.data`；它只应填充 `.grad`。",
    "For `{program}` every leaf's grad is still 0: no gradient reached the leaves. Each `_backward` passes on the grad that its Value holds at that moment. So seed the output's grad with 1 *before* any `_backward` runs, and start with the output: a Value runs only after every Value made from it.":
        "对于 `{program}`，所有叶子的梯度仍为 0：没有梯度到达叶子。每个 `_backward` 传递的是它的 Value 在那一刻持有的梯度。所以要在任何 `_backward` 运行*之前*把输出的梯度设为 1，并从输出开始：一个 Value 只有在由它生成的所有 Value 都运行之后才能运行。",
    "For `x * x` at x = 3, x.grad should be 2x = 6, got {got}. A Value used twice must get the sum of both contributions: every `_backward` adds into `.grad` (`+=`), never assigns it.":
        "对于 `x * x`，在 x = 3 处，`x.grad` 应为 2x = 6，得到的却是 {got}。被使用两次的 Value 必须得到两份贡献之和：每个 `_backward` 都要累加到 `.grad` 上（`+=`），而不是赋值。",
    "For `{program}` at x = 1.5, y = -2, the leaves' grads should be {want}, got {got}. The Value `h` ran its `_backward` before both of its users had added their gradient to `h.grad`. Run the Values in reverse topological order: a Value only after every Value made from it.":
        "对于 `{program}`，在 x = 1.5、y = -2 处，叶子的梯度应为 {want}，得到的却是 {got}。Value `h` 在它的两个使用者都把梯度加到 `h.grad` 之前，就运行了自己的 `_backward`。请按拓扑序的逆序运行各个 Value：一个 Value 只在由它生成的所有 Value 之后运行。",
    "a depth-first walk that appends a Value after all of its `_prev` gives `order`; then call `v._backward()` for v in reversed(order)":
        "用深度优先遍历，在访问完一个 Value 的所有 `_prev` 之后再把它加入列表，就得到 `order`；然后对 `reversed(order)` 中的每个 `v` 调用 `v._backward()`",
    "For `{code}` PyTorch's grads of the leaves are {want}, yours are {got}. Visit each Value once, in reverse topological order, and add (`+=`) what arrives.":
        "对于 `{code}`，PyTorch 算出的叶子梯度是 {want}，你的是 {got}。请按拓扑序的逆序，每个 Value 只访问一次，并把到达的梯度累加（`+=`）起来。",
    # nb02.py
    "indexing failed ({error}): a sequence of length n has the steps 0 to n - 1, so its last real step is one before its length.":
        "索引出错（“{error}”）：长度为 n 的序列有第 0 到第 n - 1 个时间步，所以它最后一个真实时间步比长度小 1。",
    "for row i the last real step is `out[i, lengths[i] - 1]`.":
        "第 i 行最后一个真实时间步是 `out[i, lengths[i] - 1]`。",
    "each sequence's output at its last real step, from the padded outputs":
        "从填充后的输出中取出每个序列在最后一个真实时间步的输出",
    "for a batch of {batch} with hidden size 3 return shape {shape}, one row per sequence; got {got_shape}.":
        "批量大小为 {batch}、隐状态大小为 3 时，应返回形状 {shape}，每个序列一行；得到的却是 {got_shape}。",
    "you took the last *padded* step: for every sequence shorter than the longest, that step is padding. Each row needs its own last real step.":
        "你取的是*填充后*的最后一个时间步：对于每个比最长序列短的序列，那一步是填充。每一行都需要取自己最后一个真实时间步。",
    "`out[:, -1]` is one time step for all rows; row i needs step `lengths[i] - 1`.":
        "`out[:, -1]` 对所有行取的是同一个时间步；第 i 行需要的是第 `lengths[i] - 1` 步。",
    "with lengths {lengths}, row i should be the output at row i's own last real step. Pick one (batch, time) pair per row: index both dimensions together.":
        "长度为 {lengths} 时，第 i 行应是第 i 个序列在自己最后一个真实时间步的输出。每行取一对 (batch, time) 下标：同时对两个维度做索引。",
    "`out[rows, steps]` with two index tensors of length batch picks `out[rows[k], steps[k]]` for each k.":
        "用两个长度为 batch 的索引张量，`out[rows, steps]` 会对每个 k 取出 `out[rows[k], steps[k]]`。",
    "on the padded outputs of a real RNN your rows differ from its final hidden states.":
        "在真实 RNN 的填充后输出上，你取出的行与它的最终隐状态不同。",
    "your function built or used tensors that require grad (`{call}`). The question asks for a prediction: work the count out from the numbers section 3 measured, without building or drawing a graph.":
        "你的函数构造或使用了需要梯度的张量（`{call}`）。题目要求的是预测：请根据第 3 节测得的数字算出节点数，不要构造或绘制计算图。",
    "the node count of the cell loop for any length, predicted without drawing":
        "不画图，预测任意长度下RNNCell 循环的节点数",
    "your function has no answer for length {n} ({error}). Find a rule that works for every length n >= 1.":
        "你的函数对长度 {n} 给不出答案（{error}）。请找出一条对所有长度 n >= 1 都成立的规律。",
    "return the number of nodes as an int, got {type}.":
        "请以 int 返回节点数，得到的却是 {type}。",
    "for length {n} you predict {got}, the graph has {want}: the 4 parameters' `AccumulateGrad` nodes are there once, whatever the length.":
        "长度为 {n} 时，你预测 {got}，计算图有 {want} 个节点：无论长度多少，4 个参数的 `AccumulateGrad` 节点都只出现一次。",
    "for length {n} you predict {got}, the graph has {want}: scaling the whole length-1 graph counts the shared parameters once per step; they are shared (one `AccumulateGrad` each), only `per_step` nodes repeat.":
        "长度为 {n} 时，你预测 {got}，计算图有 {want} 个节点：把长度为 1 的整个计算图按步数放大，会让共享参数每步都被计一次；但它们是共享的（各有一个 `AccumulateGrad`），只有 `per_step` 个节点会重复。",
    "for length {n} you predict {got}, the graph has {want}. Start from the length-1 or length-2 total and add `per_step` per extra step (section 3).":
        "长度为 {n} 时，你预测 {got}，计算图有 {want} 个节点。请从长度为 1 或 2 时的总数出发，每多一步加上 `per_step`（第 3 节）。",
    "the top layer's final states of a padded batch, from one packed call":
        "用一次打包调用求出填充批量中顶层的最终隐状态",
    "the lengths are not sorted, and packing expects them longest first unless you tell it otherwise. PyTorch can sort them, and put `h_n` back in the original order, for you (section 5).":
        "长度没有排序，而打包默认要求最长的排在前面，除非你另行说明。PyTorch 可以替你排序，并把 `h_n` 恢复为原来的顺序（第 5 节）。",
    "your function raised RuntimeError: {message}. Here `x` is (batch, time, features): check that your packing call knows that the batch comes first.":
        "你的函数抛出了 RuntimeError：“{message}”。这里 `x` 的形状是 (batch, time, features)：请检查你的打包调用是否知道批量维在最前面。",
    "return a tensor of shape {shape}, got {type}.":
        "请返回形状为 {shape} 的张量，得到的却是 {type}。",
    "with {layers} layer(s) `h_n` is (num_layers, batch, hidden): return the top layer, shape {shape}; got {got_shape}.":
        "有 {layers} 层时，`h_n` 的形状是 (num_layers, batch, hidden)：请返回顶层，形状为 {shape}；得到的却是 {got_shape}。",
    "your function called the RNN {calls} times: pack the batch and call it once.":
        "你的函数调用了 RNN {calls} 次：请把这个批量打包，只调用一次。",
    "these are the final states of the *padded* tensor: the RNN read the padding. Tell the RNN each sequence's real length first (section 5).":
        "这些是*填充后*张量的最终隐状态：RNN 读入了填充。请先告诉 RNN 每个序列的真实长度（第 5 节）。",
    "your rows are in the order of the sorted lengths, longest first, not in the order of the batch. Put them back, or let PyTorch sort and unsort them (section 5).":
        "你的行是按排序后的长度排列的（最长的在前），而不是按批量中的原始顺序。请把它们恢复原序，或让 PyTorch 替你排序和恢复顺序（第 5 节）。",
    "`pack_padded_sequence(..., enforce_sorted=False)` returns `h_n` in the original order.":
        "`pack_padded_sequence(..., enforce_sorted=False)` 会按原来的顺序返回 `h_n`。",
    "some rows are all zero: in padded outputs, the steps after a sequence's end are zeros. A final state is the state at each sequence's own last real step.":
        "有些行全为零：在填充后的输出中，序列结束之后的时间步都是零。最终隐状态是每个序列在自己最后一个真实时间步的状态。",
    "with {layers} layers these are the bottom layer's states. `h_n` holds one row per layer, the bottom layer first: return the top one.":
        "有 {layers} 层时，这些是底层的状态。`h_n` 每层一行，底层在前：请返回顶层。",
    "`h_n[-1]` is the top layer, `h_n[0]` the bottom one.":
        "`h_n[-1]` 是顶层，`h_n[0]` 是底层。",
    "with lengths {lengths} your states differ from the per-sequence loop's. Take the lengths from `lengths`, not from the values of `x`: a real step can be all zeros.":
        "长度为 {lengths} 时，你的状态与逐序列循环的结果不同。请从 `lengths` 中取长度，而不是根据 `x` 的值判断：真实的时间步也可能全为零。",
    "the values are right, but they carry no gradient: training needs the RNN's weights to get one through these states. Do not detach them or use `no_grad()`.":
        "值是对的，但它们不带梯度：训练需要 RNN 的权重经由这些状态得到梯度。不要分离它们，也不要使用 `no_grad()`。",
    "the values are right but the weights' gradients differ from the per-sequence loop's.":
        "值是对的，但权重的梯度与逐序列循环的结果不同。",
    "a batched cell loop that freezes each sequence's state after its last step":
        "在每个序列的最后一步之后保持其状态不变的批量单元循环",
    "return the final states, shape {shape}.":
        "请返回最终隐状态，形状为 {shape}。",
    "your function called the cell {calls} times on batches of {sizes}: run it once per time step ({steps} steps) on the whole batch.":
        "你的函数调用了单元 {calls} 次，批量大小为 {sizes}：请每个时间步在整个批量上调用一次（共 {steps} 步）。",
    "these are the states after stepping through the padding too: a sequence must keep its state once its real steps are over. Choose, row by row, between the new state and the old one.":
        "这些是连填充也走完之后的状态：序列的真实时间步结束后，它必须保持自己的状态。请逐行在新状态和旧状态之间做选择。",
    "`torch.where(mask, a, b)` takes `a` where `mask` is True and `b` elsewhere.":
        "`torch.where(mask, a, b)` 在 `mask` 为 True 处取 `a`，其余位置取 `b`。",
    "the final states of all the shorter sequences are zero: a finished sequence must *keep* its last state, not lose it. Multiplying by the mask erases it.":
        "所有较短序列的最终隐状态都是零：已结束的序列必须*保持*它的最后状态，而不是丢掉它。乘以掩码会把它清零。",
    "`torch.where` keeps a row as it was; a product with a 0/1 mask sets it to 0.":
        "`torch.where` 会让一行保持原样；与 0/1 掩码相乘则会把它置为 0。",
    "some final states are still the zero start state: those sequences never took their real steps. At step t a sequence is still running when t < its length.":
        "有些最终隐状态仍是全零的初始状态：这些序列从未走过它们的真实时间步。在第 t 步，若 t < 序列长度，该序列仍在运行。",
    "with lengths {lengths} your states differ from running each sequence on its own. At step t a sequence is still running when t < its length. Use `lengths`, not the values of `x`: a real step can be all zeros.":
        "长度为 {lengths} 时，你的状态与单独运行每个序列的结果不同。在第 t 步，若 t < 序列长度，该序列仍在运行。请使用 `lengths`，而不是 `x` 的值：真实的时间步也可能全为零。",
    "the values are right, but they carry no gradient: the check compares the parameter gradients too. Do not detach the result or use `no_grad()`.":
        "值是对的，但它们不带梯度：检查也会比较参数的梯度。不要分离结果，也不要使用 `no_grad()`。",
    "the values are right but the parameter gradients are not. A kept state must carry its gradient back to the steps that made it, and a step the mask discards must give no gradient.":
        "值是对的，但参数的梯度不对。保持下来的状态必须把梯度传回生成它的时间步，而被掩码丢弃的时间步不能产生梯度。",
    # nb03.py
    "the debugger quit and stopped the program (`BdbQuit`): when the commands run out, pdb reads end-of-file, which means quit. The last command must let the program go on (section 4).":
        "调试器退出并终止了程序（`BdbQuit`）：命令用完后，pdb 会读到文件结尾，这表示退出。最后一条命令必须让程序继续运行（第 4 节）。",
    "end the string with `c\\n` (continue)":
        "在字符串末尾加上 `c\\n`（continue，继续运行）",
    "the function returned a {type}, not a tensor: your commands replaced `a` with something that is not a tensor.":
        "函数返回了一个 {type}，而不是张量：你的命令把 `a` 换成了不是张量的东西。",
    "(nothing)":
        "（无输出）",
    "a pdb script that prints the number in `a` at the breakpoint":
        "在断点处打印 `a` 中数值的 pdb 脚本",
    "for x = {x} the function returned {got} instead of {want}: your commands changed `a`. Only print it.":
        "当 x = {x} 时，函数返回了 {got}，而不是 {want}：你的命令修改了 `a`。只需打印它。",
    "the transcript shows a tensor (`tensor([{a}], ...)`), not the number in it. Print a Python float: a tensor method turns a one-element tensor into one.":
        "输出中显示的是一个张量（`tensor([{a}], ...)`），而不是其中的数值。请打印一个 Python 浮点数：有一个张量方法可以把单元素张量转换成浮点数。",
    "`t.item()` is the Python number held by a one-element tensor `t`":
        "`t.item()` 是单元素张量 `t` 中的 Python 数值",
    "for x = {x}, `a` holds {a}, but no line your commands printed is that number. Use pdb's print command on the number held by `a` (section 4). Your commands printed:\n":
        "当 x = {x} 时，`a` 中的值是 {a}，但你的命令打印的每一行都不是这个数。请用 pdb 的打印命令输出 `a` 中的数值（第 4 节）。你的命令打印了：\n",
    "`p expression` prints the value of a Python expression in the stopped function":
        "`p expression` 会在暂停的函数中打印一个 Python 表达式的值",
    "a pdb script that doubles `a` at the breakpoint, changing result and gradient":
        "在断点处把 `a` 加倍、从而改变结果和梯度的 pdb 脚本",
    "for x = {x} the result is still 3x + 1 = {got}: `a` was not changed. At the pdb prompt, a line that starts with `a` is pdb's `args` command, not Python. Mark the line as a Python statement (section 5).":
        "当 x = {x} 时，结果仍是 3x + 1 = {got}：`a` 没有被修改。在 pdb 提示符下，以 `a` 开头的一行是 pdb 的 `args` 命令，而不是 Python 代码。请把这一行标记为 Python 语句（第 5 节）。",
    "`!` in front of a line runs it as Python: `!name = ...`":
        "在一行前面加 `!`，就会把它当作 Python 代码运行：`!name = ...`",
    "for x = {x} the result should be 2·3x + 1 = {want}, got {got}.":
        "当 x = {x} 时，结果应为 2·3x + 1 = {want}，得到的却是 {got}。",
    "the result no longer requires grad: your new `a` was cut from the graph (`.detach()`, `.data`, `.item()`); compute it from `a` itself.":
        "结果不再需要梯度：你的新 `a` 被从计算图中切断了（`.detach()`、`.data`、`.item()`）；请由 `a` 本身计算它。",
    "for x = {x} the result is right, but it no longer uses the `a` that the debugger stopped at: your commands computed a new `a` from `x` again. The question asks you to double the `a` that is already there (section 5).":
        "当 x = {x} 时，结果是对的，但它不再使用调试器暂停时的那个 `a`：你的命令又从 `x` 重新计算了一个新的 `a`。题目要求把已有的 `a` 加倍（第 5 节）。",
    "the result is not connected to x: compute the new `a` from `a`.":
        "结果与 `x` 没有连接：请由 `a` 计算新的 `a`。",
    "the result is right, but x.grad = {grad} instead of 6: the doubled `a` must be computed from `a` (a recorded op), so the gradient follows.":
        "结果是对的，但 `x.grad` = {grad}，而不是 6：加倍后的 `a` 必须由 `a` 计算得到（一个被记录的操作），这样梯度才能随之传递。",
    "a hook that records the gradient flowing into a tensor, without changing it":
        "记录流入张量的梯度而不改变它的钩子",
    "return the list the hook fills, got {type}.":
        "请返回钩子填充的那个列表，得到的却是 {type}。",
    "after one backward() the list holds {seen!r}, not one gradient. Register a hook on `h`: a function that autograd calls with the gradient of `h` during backward. Let it add that gradient to the list (section 1).":
        "一次 `backward()` 之后，列表中是 {seen!r}，而不是一个梯度。请在 `h` 上注册一个钩子：这是一个函数，自动微分会在反向传播时用 `h` 的梯度调用它。让它把这个梯度添加到列表中（第 1 节）。",
    "`h.register_hook(fn)` makes autograd call `fn(grad)`":
        "`h.register_hook(fn)` 会让自动微分调用 `fn(grad)`",
    "record the gradient itself, shaped like h {shape}.":
        "请记录梯度本身，其形状与 `h` 相同，即 {shape}。",
    "you recorded {got}, but dL/dh is {want}.":
        "你记录的是 {got}，但 dL/dh 是 {want}。",
    "x.grad was not filled: leave the graph from x to h as it is.":
        "`x.grad` 没有被填充：请保持从 `x` 到 `h` 的计算图不变。",
    "x.grad is {got} instead of {want}: your hook changed the gradient. A hook that returns a tensor replaces it; a watching hook returns None.":
        "`x.grad` 是 {got}，而不是 {want}：你的钩子改变了梯度。返回张量的钩子会替换梯度；只做观察的钩子应返回 `None`。",
    "a second backward() through h should add a second gradient to the list: the hook must stay registered and append each time.":
        "第二次经过 `h` 的 `backward()` 应该向列表中再添加一个梯度：钩子必须保持注册状态，并且每次都追加。",
    "log with the same values but a finite gradient where x <= 0":
        "值不变、但在 x <= 0 处梯度有限的 log",
    "return a tensor shaped like x, {shape}.":
        "请返回与 `x` 形状相同的张量，即 {shape}。",
    "at x = {x} the values should be log(x) where x > 0 and 0 elsewhere, {want}; got {got}.":
        "在 x = {x} 处，值应在 x > 0 处为 log(x)，其余位置为 0，即 {want}；得到的却是 {got}。",
    "at x = {x} the values are wrong only at the tiny x > 0: log(1e-20) is {want:.1f}, you give {got:.1f}. A clamp or a small number added to x changes log(x) there: change the input of log only where x <= 0.":
        "在 x = {x} 处，只有极小的 x > 0 处的值不对：log(1e-20) 是 {want:.1f}，你给出的是 {got:.1f}。截断（clamp）或给 x 加一个小数都会改变那里的 log(x)：请只在 x <= 0 处改变 log 的输入。",
    "the result does not require grad: keep it a function of x (no `.detach()`, `.data` or `.item()`).":
        "结果不需要梯度：请让它保持为 `x` 的函数（不要用 `.detach()`、`.data` 或 `.item()`）。",
    "the result is not connected to x: keep it a function of x.":
        "结果与 `x` 没有连接：请让它保持为 `x` 的函数。",
    "at x = {x} the gradient has NaN ({grad}): `torch.where` sends 0 to the branch it discards, and log's backward makes 0 · (1/0) = NaN there. Make the discarded branch safe: take the log of a harmless value where x <= 0 (section 2).":
        "在 x = {x} 处，梯度中有 NaN（{grad}）：`torch.where` 会把 0 传给被舍弃的分支，而 log 的反向传播在那里算出 0 · (1/0) = NaN。请让被舍弃的分支变得安全：在 x <= 0 处对一个无害的值取 log（第 2 节）。",
    "a safe input is `torch.where(x > 0, x, c)`, with a constant c where log is smooth":
        "安全的输入是 `torch.where(x > 0, x, c)`，其中常数 c 取在 log 光滑的地方",
    "at x = {x} the gradient should be 1/x where x > 0 and 0 elsewhere, {want}; got {got}.":
        "在 x = {x} 处，梯度应在 x > 0 处为 1/x，其余位置为 0，即 {want}；得到的却是 {got}。",
    "`gradcheck` disagrees with your gradient at points away from 0.":
        "在远离 0 的点上，`gradcheck` 与你的梯度不一致。",
    # nb04.py
    "x.grad was not filled: `backward` must return a gradient for x.":
        "`x.grad` 没有被填充：`backward` 必须为 `x` 返回一个梯度。",
    "`backward` must return one gradient per input of `forward`, in order. The threshold is an input too, and its gradient is 0 except at the jump (section 4).":
        "`backward` 必须按顺序为 `forward` 的每个输入返回一个梯度。阈值也是一个输入，除跳变点外它的梯度都是 0（第 4 节）。",
    "The threshold is a Python float, not a tensor: its gradient must be `None`. `None` tells autograd \"zero: nothing to add\" (section 4).":
        "阈值是一个 Python 浮点数，不是张量：它的梯度必须是 `None`。`None` 告诉自动微分“为零：无需累加”（第 4 节）。",
    "the backward of y = x**2, checked by gradcheck and gradgradcheck":
        "y = x**2 的反向传播，用 `gradcheck` 和 `gradgradcheck` 检验",
    "keep the forward as it was: `Square` must compute x * x.":
        "请保持前向计算不变：`Square` 必须计算 x * x。",
    "`backward` must return a gradient shaped like x.":
        "`backward` 必须返回与 `x` 形状相同的梯度。",
    "your gradient ignores `grad_output`. The chain rule multiplies the local derivative by the gradient that arrives from above.":
        "你的梯度忽略了 `grad_output`。链式法则要把局部导数乘以从上游传来的梯度。",
    "`x, = ctx.saved_tensors`, then `local_derivative * grad_output`":
        "先 `x, = ctx.saved_tensors`，再 `local_derivative * grad_output`",
    "you return x * grad_output, but d(x²)/dx is 2x.":
        "你返回的是 x * grad_output，但 d(x²)/dx 是 2x。",
    "d(x²)/dx is 2x, times grad_output. At x = {x} autograd gets {want}, you {got}.":
        "d(x²)/dx 是 2x，再乘以 grad_output。在 x = {x} 处，自动微分得到 {want}，你得到的是 {got}。",
    "`gradcheck` disagrees with your backward: compare it with finite differences.":
        "`gradcheck` 与你的 `backward` 不一致：请与有限差分对照。",
    "first derivatives are right, but second derivatives are not (`gradgradcheck` fails). Autograd must be able to differentiate your backward in float64. Compute it with torch ops on the saved `x`, without `.detach()`, `.data`, `.item()`, NumPy, `torch.no_grad()` or a float32 copy.":
        "一阶导数是对的，但二阶导数不对（`gradgradcheck` 失败）。自动微分必须能在 float64 下对你的 `backward` 求导。请在保存的 `x` 上用 torch 算子计算它，不要用 `.detach()`、`.data`、`.item()`、NumPy、`torch.no_grad()` 或 float32 副本。",
    "LeakyThreshold's true derivative in backward":
        "在 `backward` 中实现 LeakyThreshold 的真实导数",
    "below the threshold LeakyThreshold is 0.1 * x, so its slope there is 0.1, not 0: that was ThresholdReLU's backward.":
        "在阈值以下，LeakyThreshold 是 0.1 * x，所以那里的斜率是 0.1，而不是 0：斜率为 0 的是 ThresholdReLU 的反向传播。",
    "your gradient ignores `grad_output`: multiply the local slope (1 or 0.1) by it.":
        "你的梯度忽略了 `grad_output`：请把局部斜率（1 或 0.1）乘以它。",
    "with threshold {t}, the local slope is 1 above the threshold and 0.1 below it. Check two things: both sides are multiplied by grad_output, and x is compared with the threshold that forward got, `ctx.threshold`.":
        "阈值为 {t} 时，局部斜率在阈值以上是 1，在阈值以下是 0.1。请检查两点：两侧都乘以了 grad_output；`x` 是与 `forward` 收到的阈值 `ctx.threshold` 比较的。",
    "`torch.where(x > ctx.threshold, a, b)` picks `a` above the threshold, `b` below it":
        "`torch.where(x > ctx.threshold, a, b)` 在阈值以上取 `a`，在阈值以下取 `b`",
    "`gradcheck` disagrees with your backward (float64 points away from the threshold).":
        "`gradcheck` 与你的 `backward` 不一致（在远离阈值的 float64 点上）。",
    "LeakyThreshold in the setup_context style, under vmap(grad(...))":
        "用 `setup_context` 写法实现 LeakyThreshold，并在 `vmap(grad(...))` 下运行",
    "`torch.func` transforms need the new style: a `forward` that only computes, without `ctx`, and a separate `setup_context` that saves what `backward` needs (section 7).":
        "`torch.func` 变换需要新的写法：一个只负责计算、不带 `ctx` 的 `forward`，以及一个单独的 `setup_context`，用来保存 `backward` 需要的东西（第 7 节）。",
    "`def forward(x, threshold): ...` and `def setup_context(ctx, inputs, output): ...`":
        "`def forward(x, threshold): ...` 和 `def setup_context(ctx, inputs, output): ...`",
    "vmap needs a batching rule: ask PyTorch to derive it from the ops you used (section 7).":
        "`vmap` 需要一条批处理规则：让 PyTorch 根据你用到的算子推导出来（第 7 节）。",
    "`generate_vmap_rule = True`, a class attribute":
        "`generate_vmap_rule = True`，一个类属性",
    "per-row gradients with threshold {t} differ from autograd through built-in ops. The local slope is 1 above the threshold and 0.1 below it, and both sides are multiplied by grad_output. Does `backward` compare the saved *input* x (not the output) with the threshold?":
        "阈值为 {t} 时，逐行梯度与自动微分经由内置算子算出的结果不同。局部斜率在阈值以上是 1，在阈值以下是 0.1，两侧都要乘以 grad_output。`backward` 是否用保存的*输入* x（而不是输出）与阈值比较？",
    "the forward values are wrong: y = where(x > t, x, 0.1 * x).":
        "前向计算的值不对：应为 y = where(x > t, x, 0.1 * x)。",
    # nb05.py
    "predicting which parameters a batch of depths leaves without a gradient":
        "预测一批深度会让哪些参数得不到梯度",
    "`never_reached` started a backward pass (on the model or on a copy of it): the question asks you to predict, from `depths` and the model's layers alone.":
        "`never_reached` 启动了一次反向传播（在模型或其副本上）：题目要求你只根据 `depths` 和模型的层来预测。",
    "Return a list of parameter names such as 'layers.4.weight', got {got!r}.":
        "请返回参数名的列表，例如 'layers.4.weight'，得到的却是 {got!r}。",
    "With depths {depths} and {layers} layers, backward leaves {want} without a gradient; you predicted {got}. Layer i runs when some sample has depth > i (section 3's rule); list weight and bias, in `named_parameters()` order.":
        "深度为 {depths}、共 {layers} 层时，反向传播后 {want} 没有梯度；你预测的是 {got}。当某个样本的深度 > i 时，第 i 层就会运行（第 3 节的规律）；请按 `named_parameters()` 的顺序列出 weight 和 bias。",
    "a batched forward that runs each layer on the still-active rows only":
        "每层只在仍然活跃的行上运行的批量前向传播",
    "The output should have the loop's shape {shape} (one row per sample, after the head), got {got!r}.":
        "输出的形状应与循环的结果相同，即 {shape}（经过输出头后每个样本一行），得到的却是 {got!r}。",
    "With depths {depths}, layer {i} ran on {ran}, but {still} (depth > {i}). Select the active rows (`h[rows]`), then call the layer once on all of them.":
        "深度为 {depths} 时，第 {i} 层在 {ran}上运行，但{still}（深度 > {i}）。请选出活跃的行（`h[rows]`），然后对它们整体调用一次该层。",
    "{n} rows are still active":
        "仍有 {n} 行活跃",
    "{n} row is still active":
        "仍有 {n} 行活跃",
    "{n} rows":
        "{n} 行",
    "{n} row":
        "{n} 行",
    "With depths {depths}, your layers multiplied {rows} rows in {products} matrix products; running each layer once on its active rows takes {want_rows} rows in {want_products} products ({active_rows}). Select the rows with depth > i, run layer i on those rows only, all at once.":
        "深度为 {depths} 时，你的各层在 {products} 次矩阵乘法中共乘了 {rows} 行；而每层只在其活跃行上运行一次，只需 {want_products} 次乘法、共 {want_rows} 行（{active_rows}）。请选出深度 > i 的行，只在这些行上一次性运行第 i 层。",
    "With depths {depths} the outputs differ from the loop's by {diff:.2g}: a row is still active in layer i when its depth is > i; put the layer's output back with `index_copy` and apply the head last.":
        "深度为 {depths} 时，输出与循环的结果相差 {diff:.2g}：当一行的深度 > i 时，它在第 i 层仍然活跃；请用 `index_copy` 把该层的输出放回去，最后再应用输出头。",
    "The gradient of {name} differs from the loop's: keep every step inside autograd (no `.data`, no in-place writes into `x`).":
        "{name} 的梯度与循环的结果不同：请让每一步都留在自动微分之内（不要用 `.data`，不要原地写入 `x`）。",
    "The gradient with respect to the input `x` differs from the loop's: inactive rows must pass through unchanged, and nothing may be detached.":
        "关于输入 `x` 的梯度与循环的结果不同：不活跃的行必须原样通过，而且不能分离任何东西。",
    "predicting the number of autograd nodes at any depth":
        "预测任意深度下的自动微分节点数",
    "`predicted_nodes` ran torch operations ({names}): it builds a model or a graph. The question asks for a prediction: work the count out from numbers (what the head records, section 2's `per_layer`).":
        "`predicted_nodes` 运行了 torch 操作（{names}）：它构造了模型或计算图。题目要求的是预测：请根据数字算出节点数（输出头记录的节点、第 2 节的 `per_layer`）。",
    "At depth {depth} the graph has {want} nodes, you predicted {got!r}. Count the depth-0 graph (the head alone: its op nodes and its two parameters) and what each Linear+ReLU layer adds (section 2's `per_layer`).":
        "深度为 {depth} 时，计算图有 {want} 个节点，你预测的是 {got!r}。请数出深度为 0 的计算图（只有输出头：它的算子节点和两个参数），再加上每个 Linear+ReLU 层增加的节点（第 2 节的 `per_layer`）。",
    # nb06.py
    "important keys count three times as much, by adding a log to the scores":
        "给注意力分数加上对数，使重要的键按三倍计入",
    "Return the (queries, keys) weights, shape {shape}, got {got!r}.":
        "请返回 (queries, keys) 的注意力权重，形状为 {shape}，得到的却是 {got!r}。",
    "With scores between {low:.0f} and {high:.0f} your weights hold NaN or inf: exp(score) overflows float32 above about 88. A softmax does not overflow (it subtracts each row's largest score first). So put the factor in as an added term, before one softmax (section 3).":
        "注意力分数在 {low:.0f} 到 {high:.0f} 之间时，你的权重中出现了 NaN 或 inf：分数大于约 88 时，exp(score) 会超出 float32 的范围。softmax 不会溢出（它会先减去每行最大的分数）。所以请把因子作为一个加项，放在唯一一次 softmax 之前（第 3 节）。",
    "Each row of weights should sum to 1: end with a softmax over the keys (dim=-1).":
        "每一行权重之和应为 1：最后对键做一次 softmax（dim=-1）。",
    "A key got weight 0: nothing is dropped here, unimportant keys count once. log(importance) alone would drop the importance-0 keys.":
        "有一个键的权重为 0：这里不丢弃任何键，不重要的键按一倍计入。单用 log(importance) 会丢弃重要性为 0 的键。",
    "With importance {mask} (d={d}) the weights are not ∝ (1 + 2·importance)·exp(score). Give each key a factor f (3 or 1). A softmax can only add to the scores, and f·exp(score) = exp(score + log f) (section 3). Remember the 1/sqrt(d) scaling. Multiplying the scores is the anti-pattern of section 2.":
        "重要性为 {mask}（d={d}）时，权重不与 (1 + 2·importance)·exp(score) 成正比。请给每个键一个因子 f（3 或 1）。softmax 只能对分数做加法，而 f·exp(score) = exp(score + log f)（第 3 节）。别忘了 1/sqrt(d) 缩放。把分数相乘正是第 2 节中的反面例子。",
    "`f = 1 + 2 * importance` is 3 or 1 per key; the softmax's input is the scaled scores plus a term made from `f`":
        "`f = 1 + 2 * importance` 对每个键是 3 或 1；softmax 的输入是缩放后的分数加上一个由 `f` 构成的项",
    "doubling every logit, computed from the weights alone":
        "只用注意力权重算出每个 logit 翻倍后的结果",
    "`sharpen` should return weights of the same shape as `p`, {shape}, got {got!r}.":
        "`sharpen` 应返回与 `p` 形状相同的权重，即 {shape}，得到的却是 {got!r}。",
    "For weights of shape {shape}, each row (the last dim) should sum to 1: renormalise per row, `.sum(dim=-1, keepdim=True)`.":
        "对于形状为 {shape} 的权重，每一行（最后一维）之和应为 1：请逐行重新归一化，`.sum(dim=-1, keepdim=True)`。",
    "For weights of shape {shape}, `sharpen(softmax(s))` is not `softmax(2 * s)`: exp(2s) = exp(s)², and softmax divides out the row's constant.":
        "对于形状为 {shape} 的权重，`sharpen(softmax(s))` 不等于 `softmax(2 * s)`：exp(2s) = exp(s)²，而 softmax 会约去每行的常数。",
    "batched, multi-head importance weighting with scaled_dot_product_attention":
        "用 `scaled_dot_product_attention` 实现批量、多头的重要性加权",
    "With q {q_shape} and importance {importance_shape}: {error}. The attn_mask must broadcast to (batch, heads, queries, keys): importance is (batch, keys), so give it the heads and queries dims as size-1 dims.":
        "当 q 的形状为 {q_shape}、importance 的形状为 {importance_shape} 时：“{error}”。attn_mask 必须能广播到 (batch, heads, queries, keys)：importance 的形状是 (batch, keys)，所以要给它加上大小为 1 的 heads 维和 queries 维。",
    " and computed weights itself ({names})":
        "，并且自己计算了权重（{names}）",
    "The question asks for one call to F.scaled_dot_product_attention; your function called it {calls} time(s){also}. Let the one call do the softmax: the importance goes in through its attn_mask.":
        "题目要求只调用一次 `F.scaled_dot_product_attention`；你的函数调用了它 {calls} 次{also}。请让这一次调用完成 softmax：重要性通过它的 `attn_mask` 传入。",
    "Return what the one F.scaled_dot_product_attention call gives: your result is not its output. Let that call do all the work, the importance going in through its attn_mask.":
        "请返回那一次 `F.scaled_dot_product_attention` 调用的结果：你的结果不是它的输出。请让这次调用完成全部工作，重要性通过它的 `attn_mask` 传入。",
    "The output should be (batch, heads, queries, d) = {shape}, got {got!r}.":
        "输出应为 (batch, heads, queries, d) = {shape}，得到的却是 {got!r}。",
    "With importance values {values} the output is not softmax(scores + log(importance)) @ v: a float attn_mask is *added* to the scaled scores (pass log(importance), not importance, and not a boolean mask, which ignores the values 2 and 3), one importance row per batch element. Importance 0 must drop its key exactly: log(0) = -inf gives weight 0, an epsilon or a clamp does not.":
        "重要性取值为 {values} 时，输出不等于 softmax(scores + log(importance)) @ v：浮点型的 `attn_mask` 会被*加到*缩放后的分数上（请传入 log(importance)，而不是 importance，也不是布尔掩码，因为布尔掩码会忽略取值 2 和 3），批量中的每个元素对应一行重要性。重要性为 0 的键必须被精确地丢弃：log(0) = -inf 给出的权重是 0，加一个小量（epsilon）或截断（clamp）都做不到。",
    "The values are right but the output does not require grad: keep the call inside autograd (no `.detach()`, no `torch.no_grad()`), so gradients reach q, k and v.":
        "值是对的，但输出不需要梯度：请让这次调用留在自动微分之内（不要用 `.detach()`，不要用 `torch.no_grad()`），这样梯度才能到达 q、k 和 v。",
    "The values are right but the gradient with respect to q is not: keep the call inside autograd (no `.detach()`, no `torch.no_grad()`).":
        "值是对的，但关于 q 的梯度不对：请让这次调用留在自动微分之内（不要用 `.detach()`，不要用 `torch.no_grad()`）。",
    # nb07.py
    "activation-gradient norms recorded with backward hooks":
        "用反向钩子记录激活值梯度的范数",
    "a depth-{depth} {act} net with residual blocks":
        "深度为 {depth}、带残差块的 {act} 网络",
    "a depth-{depth} {act} net":
        "深度为 {depth} 的 {act} 网络",
    "For {net}, return a list with one norm per block ({blocks}), got {got!r}.":
        "对于{net}，请返回一个列表，每个块一个范数（共 {blocks} 个），得到的却是 {got!r}。",
    "Your hooks are still registered on the blocks after the function returned. Each registration gives back a handle: keep the handles, and remove every hook before you return.":
        "函数返回后，你的钩子仍然注册在这些块上。每次注册都会返回一个句柄：请保存这些句柄，并在返回前移除所有钩子。",
    "`handle = block.register_full_backward_hook(hook)`, later `handle.remove()`":
        "`handle = block.register_full_backward_hook(hook)`，之后调用 `handle.remove()`",
    "For {net}, a block ran without a full backward hook. This exercise records dL/dh with module hooks: register one on each block, before the forward pass. retain_grad(), tensor hooks and autograd.grad give the same numbers with other tools; register_backward_hook (without 'full') is the old kind.":
        "对于{net}，有一个块在运行时没有完整反向钩子（`register_full_backward_hook`）。本练习用模块钩子记录 dL/dh：请在前向传播之前，在每个块上注册一个。`retain_grad()`、张量钩子和 `autograd.grad` 用别的工具也能得到相同的数值；`register_backward_hook`（名字里没有 full）是旧的那种。",
    "`handle = block.register_full_backward_hook(hook)` for each block in `model.blocks`":
        "对 `model.blocks` 中的每个块调用 `handle = block.register_full_backward_hook(hook)`",
    "For {net} your norms are those of the block *inputs*, one block off. The hook receives two gradients: the one at the module's input and the one at its output.":
        "对于{net}，你的范数是块*输入*处的，错开了一个块。钩子会收到两个梯度：模块输入处的梯度和输出处的梯度。",
    "in `hook(module, grad_input, grad_output)`, dL/d(output) is `grad_output[0]`":
        "在 `hook(module, grad_input, grad_output)` 中，dL/d(output) 是 `grad_output[0]`",
    "For {net}, the gradient norms of the block outputs are {want}, got {got}. Store one norm per block, the gradient at its output, in block order (block 0 first), after one backward pass of F.cross_entropy(model(x), y).":
        "对于{net}，各块输出处的梯度范数是 {want}，得到的却是 {got}。请对 `F.cross_entropy(model(x), y)` 做一次反向传播，然后按块的顺序（块 0 在前）为每个块保存一个范数，即其输出处梯度的范数。",
    "hooks fire from the last block to the first; `def hook(module, grad_input, grad_output, i=i)` keeps each block's index i inside its own hook":
        "钩子从最后一个块到第一个块依次触发；`def hook(module, grad_input, grad_output, i=i)` 能让每个块的索引 i 保存在它自己的钩子里",
    "a Linear layer's weight and bias gradients from its input and dL/dz":
        "由输入和 dL/dz 求出 Linear 层的权重梯度和偏置梯度",
    "Return a pair (weight gradient, bias gradient), as a tuple or a list; got {type}.":
        "请返回一对（权重梯度，偏置梯度），元组或列表都可以；得到的却是 {type}。",
    "`linear_grads` ran a backward pass: autograd computed the gradients for you. The exercise is to write them from `x` and dL/dz with matrix operations (section 2).":
        "`linear_grads` 运行了一次反向传播：是自动微分替你算出了梯度。这个练习要你用矩阵运算，从 `x` 和 dL/dz 写出它们（第 2 节）。",
    "The weight gradient has the shape of the weight, (out, in) = {shape}; got {got_shape}. Which product of dL/dz, shape (batch, out), and x, shape (batch, in), gives (out, in)?":
        "权重梯度的形状与权重相同，(out, in) = {shape}；得到的却是 {got_shape}。dL/dz 的形状为 (batch, out)，x 的形状为 (batch, in)，它们怎样相乘才能得到 (out, in)？",
    "`a.T @ b` multiplies (k, batch) by (batch, m); the batch dimension is summed away":
        "`a.T @ b` 把 (k, batch) 与 (batch, m) 相乘；batch 维在求和中消去",
    "With a batch of {batch} the weight gradient differs from autograd's. W.grad adds up one outer product dL/dz ⊗ x per sample. Do not average: any mean is already in dL/dz.":
        "批量大小为 {batch} 时，权重梯度与自动微分的结果不同。W.grad 是每个样本的外积 dL/dz ⊗ x 之和。不要取平均：如果有求均值，它已经包含在 dL/dz 中了。",
    "With a batch of {batch} the bias gradient differs from autograd's. The bias is added to every sample, so its gradient is dL/dz added up over the batch.":
        "批量大小为 {batch} 时，偏置梯度与自动微分的结果不同。偏置加在每个样本上，所以它的梯度是 dL/dz 在批量上的和。",
    "For one sample, ‖W.grad‖ should be ‖dL/dz‖ · ‖x‖ (section 2).":
        "对于单个样本，‖W.grad‖ 应等于 ‖dL/dz‖ · ‖x‖（第 2 节）。",
    "a dict of `build(...)` arguments":
        "一个由 `build(...)` 参数组成的字典",
    "a depth-30 network whose gradient neither vanishes nor explodes":
        "梯度既不消失也不爆炸的 30 层网络",
    "`build` takes only {allowed}; got {got}.":
        "`build` 只接受 {allowed}；得到的却是 {got}。",
    "Give the activation function as a class, one of nn.Sigmoid, nn.Tanh or nn.ReLU (act=...); got {act!r}.":
        "请以类的形式给出激活函数，即 nn.Sigmoid、nn.Tanh 或 nn.ReLU 之一（act=...）；得到的却是 {act!r}。",
    "Keep depth 30: a shallower network hides the problem, it does not fix it.":
        "请保持深度为 30：更浅的网络只是掩盖了问题，并没有解决它。",
    "`{name}` must be True or False: True makes the change, False leaves it out. You gave {name}={value!r}.":
        "`{name}` 必须是 True 或 False：True 表示做这项改动，False 表示不做。你给出的是 {name}={value!r}。",
    "Change exactly one thing besides the activation function; you changed {changes}.":
        "除激活函数外，只能改动一项；你改动了 {changes}。",
    "{act} and {change}":
        "{act} 加 {change}",
    "{act} and no other change":
        "{act}，不做其他改动",
    "the first/last ratio is {w_ratio:.1e} for W.grad and {h_ratio:.1e} for dL/dh (seed {seed})":
        "W.grad 的首层/末层比值为 {w_ratio:.1e}，dL/dh 的为 {h_ratio:.1e}（随机种子 {seed}）",
    "With {what}, {measured}: the gradient still vanishes (fixed means between 1/30 and 30). Look at section 3's table: which change fixes your activation function?":
        "设置为“{what}”时，{measured}：梯度仍在消失（修复的标准是比值在 1/30 到 30 之间）。请看第 3 节的表格：哪种改动能修复你用的激活函数？",
    "With {what}, {measured}: the gradient explodes toward the input (fixed means between 1/30 and 30): on the way back, the blocks make it larger. Which change does section 3's table call fixed for your activation function?":
        "设置为“{what}”时，{measured}：梯度朝输入方向爆炸（修复的标准是比值在 1/30 到 30 之间）：反向传播途中，各块让梯度越来越大。对于你用的激活函数，第 3 节的表格认为哪种改动算是修复？",
    "The gradients are balanced, but block 29's output hardly varies across the batch (its standard deviation is {std:.1e}): the forward signal has collapsed.":
        "梯度是平衡的，但块 29 的输出在批量中几乎没有变化（标准差为 {std:.1e}）：前向信号已经塌缩。",
    # nb08.py
    "predicting what torch.jit.trace records for a per-sequence loop":
        "预测 `torch.jit.trace` 会为逐序列循环记录什么",
    "Your answer runs `torch.jit.trace` to count the calls. The exercise asks for a prediction: work the count out from `lengths` and what section 3 showed, without tracing.":
        "你的答案运行了 `torch.jit.trace` 来数调用次数。本练习要求的是预测：请根据 `lengths` 和第 3 节展示的内容算出次数，不要追踪。",
    "Return a Python int, got {type} ({got!r}).":
        "请返回 Python int，得到的却是 {type}（{got!r}）。",
    "For lengths {lengths} the trace holds {want} `aten::rnn_tanh` calls, you predicted {got}. The tracer records each op that ran once per run of the Python loop; and `nn.RNN` runs a whole sequence in one call, whatever its length.":
        "长度为 {lengths} 时，追踪结果中有 {want} 次 `aten::rnn_tanh` 调用，你预测的是 {got}。Python 循环每运行一次，追踪器就把运行过的每个算子记录一次；而 `nn.RNN` 无论序列多长，都在一次调用中处理整个序列。",
    "dividing by the maximum inside the graph, with finite gradients":
        "在计算图内除以最大值，并保持梯度有限",
    "divide x by a denominator that is the maximum m when m > 0, and 1 when m <= 0.":
        "让 x 除以一个分母：当 m > 0 时，分母是最大值 m；当 m <= 0 时，分母是 1。",
    "For {values} the values differ from `scale_by_max`'s {want}: got {got}. Divide by the maximum only where it is > 0; elsewhere return x unchanged.":
        "对于 {values}，结果与 `scale_by_max` 的 {want} 不同：得到的是 {got}。只在最大值 > 0 时除以最大值；否则原样返回 x。",
    "For {values} the result does not require grad: keep it inside autograd.":
        "对于 {values}，结果不需要梯度：请让它留在自动微分之内。",
    "For {values} (maximum {max:g}) the gradient is {grad}: `torch.where` differentiates *both* branches, and the branch it did not pick divides by 0 here. Choose what to divide by, not what to return: a denominator that is never 0 needs no second branch.":
        "对于 {values}（最大值为 {max:g}），梯度是 {grad}：`torch.where` 会对*两个*分支都求导，而这里没被选中的分支除以了 0。要选择的是除数，而不是返回值：一个永远不为 0 的分母就不需要第二个分支。",
    "For {values} the gradient is {grad}, the analytic one is {want}: the maximum depends on x too, so do not detach it (no `.item()`, `.detach()` or `.data` on m).":
        "对于 {values}，梯度是 {grad}，解析梯度是 {want}：最大值也依赖于 x，所以不要把它分离出来（不要对 m 使用 `.item()`、`.detach()` 或 `.data`）。",
    "`torch.compile(..., fullgraph=True)` fails on your function: it has a graph break. A Python number taken from a tensor (`.item()`, `float(...)`, an `if` on a tensor) breaks the graph, and so does a `print`: keep the choice a tensor op.":
        "`torch.compile(..., fullgraph=True)` 在你的函数上失败了：它有图中断。从张量中取出 Python 数值（`.item()`、`float(...)`、对张量做 `if` 判断）会造成图中断，`print` 也会：请用张量操作来完成这个选择。",
    "predicting the ops torch.export captures for a Sequential":
        "预测 `torch.export` 为一个 Sequential 捕获的算子",
    "Your answer runs `torch.export.export` to read the ops. The exercise asks for a prediction: work the list out from the modules of the `Sequential`, without exporting.":
        "你的答案运行了 `torch.export.export` 来读取算子。本练习要求的是预测：请根据 `Sequential` 中的模块推出这个列表，不要导出。",
    "Return a list of ops, got {type}.":
        "请返回一个算子列表，得到的却是 {type}。",
    "For {model} you predicted {got}: name each op with its overload, as export records it (`torch.ops.aten.<op>.<overload>`); a module's op uses the `default` overload.":
        "对于 {model}，你预测的是 {got}：请像导出时记录的那样，用重载名来命名每个算子（`torch.ops.aten.<op>.<overload>`）；模块的算子使用 `default` 重载。",
    "For {model} torch.export records {want}, you predicted {got}. Each module becomes one high-level ATen op (`torch.ops.aten.<op>.default`), with or without a bias: export does not split `linear` into a transpose and a matmul.":
        "对于 {model}，`torch.export` 记录的是 {want}，你预测的是 {got}。无论有没有偏置，每个模块都会变成一个高层的 ATen 算子（`torch.ops.aten.<op>.default`）：导出不会把 `linear` 拆成转置和矩阵乘法。",
    # nb09.py
    "count what the graph keeps, each storage once, with saved_tensors_hooks":
        "用 `saved_tensors_hooks` 统计计算图保存的内容，每块存储只计一次",
    "exp(x).sum() (exp keeps its 4,000-byte result)":
        "exp(x).sum()（exp 保存了它 4,000 字节的结果）",
    "h * h * h with h = exp(x) (h is saved three times: one storage)":
        "h * h * h，其中 h = exp(x)（h 被保存了三次：只有一块存储）",
    "h[:10] * h[10:20] (two views of one storage: the whole storage is kept)":
        "h[:10] * h[10:20]（同一块存储的两个视图：整块存储都被保留）",
    "x * x (mul keeps the leaf x twice: one storage)":
        "x * x（mul 保存了叶子张量 x 两次：只有一块存储）",
    "a function that returns nothing (mul keeps `scale`, a tensor that needs no gradient)":
        "一个不返回任何东西的函数（mul 保存了 `scale`，一个不需要梯度的张量）",
    "x.sum() (sum saves nothing)":
        "x.sum()（sum 不保存任何东西）",
    "for {case} your answer raised {error}: {message}. Count what `pack` sees while `fn()` runs: do not use what `fn()` returns.":
        "对于“{case}”，你的答案抛出了 {error}：“{message}”。请统计 `fn()` 运行期间 `pack` 看到的张量：不要使用 `fn()` 的返回值。",
    "return an int (bytes), not {type}.":
        "请返回 int（字节数），而不是 {type}。",
    "for {case} the graph keeps {want:,} bytes; you counted {got:,}. Count allocations, not tensors: a tensor saved by several nodes is one allocation, and a view keeps the whole memory block of the tensor it views alive.":
        "对于“{case}”，计算图保存了 {want:,} 字节；你数出的是 {got:,}。请统计内存分配，而不是张量：被多个节点保存的张量只算一次分配，而视图会让它所查看的张量的整个内存块都留在内存里。",
    "t.untyped_storage() is the memory block behind t (a view shares its base's block); its data_ptr() names the block and its nbytes() weighs all of it":
        "`t.untyped_storage()` 是 t 背后的内存块（视图与其基张量共享同一块）；它的 `data_ptr()` 标识这个内存块，`nbytes()` 给出整块的大小",
    "layers[:3] is an nn.Sequential of layers 0-2, and cp.checkpoint(part, h, use_reentrant=False) runs part on h and keeps only h":
        "`layers[:3]` 是由第 0-2 层组成的 `nn.Sequential`，而 `cp.checkpoint(part, h, use_reentrant=False)` 在 h 上运行 part，并且只保存 h",
    "your answer uses reentrant checkpointing (use_reentrant=True, which this PyTorch also uses when use_reentrant is not given). It does not record the parameters in the graph, so torch.autograd.grad, which this check uses, cannot reach them. This is a limit of reentrant checkpointing, not an error in your split. Pass use_reentrant=False, as PyTorch recommends.":
        "你的答案使用了可重入的梯度检查点（use_reentrant=True；不指定 use_reentrant 时，当前版本的 PyTorch 也使用它）。它不会把参数记录到计算图中，所以本检查所用的 `torch.autograd.grad` 无法到达这些参数。这是可重入梯度检查点的局限，不是你划分上的错误。请按 PyTorch 的建议传入 use_reentrant=False。",
    "two checkpointed halves keep one activation and give the same gradients":
        "分两半做梯度检查点，只保存一个激活值，并得到相同的梯度",
    "some weights are not in the output's graph, so they would get no gradient. Did part of the model run under torch.no_grad() or on a detached tensor? Run every layer with grad on, inside one of the two checkpoints.":
        "有些权重不在输出的计算图中，因此得不到梯度。是不是模型的一部分在 `torch.no_grad()` 下或在分离出的张量上运行了？请在开启梯度的情况下运行每一层，并让它位于两个检查点之一中。",
    "the gradients differ from the plain model's: run the same layers, in order.":
        "梯度与普通模型的不同：请按顺序运行相同的层。",
    "return the model's output for x (shape (16, 32)), not its sum or a tuple.":
        "请返回模型对 x 的输出（形状为 (16, 32)），而不是它的和或一个元组。",
    "the forward pass started the layers in the order {order}; run each of the six layers once, in order.":
        "前向传播按 {order} 的顺序启动了各层；请按顺序把六层各运行一次。",
    "the output has no graph: with use_reentrant=True and an input that does not require grad nothing is recorded. Use use_reentrant=False.":
        "输出没有计算图：使用 use_reentrant=True 且输入不需要梯度时，什么都不会被记录。请使用 use_reentrant=False。",
    "the graph still keeps {activations:,} bytes of activations; two checkpointed halves keep only the second half's input ({one:,} bytes). Every layer must be inside a checkpoint, and each half must be one checkpoint, not one per layer.":
        "计算图仍保存了 {activations:,} 字节的激活值；分成两半做检查点时，只保存后一半的输入（{one:,} 字节）。每一层都必须位于某个检查点中，并且每一半是一个检查点，而不是每层一个。",
    "the graph keeps {activations:,} bytes of activations; two checkpointed halves keep only the second half's input ({one:,} bytes). backward recomputed only layers {layers}: layers {outside} ran outside any checkpoint, so the graph keeps their activations.{sequential} Put each half in its own checkpoint.":
        "计算图保存了 {activations:,} 字节的激活值；分成两半做检查点时，只保存后一半的输入（{one:,} 字节）。反向传播只重新计算了层 {layers}：层 {outside} 在所有检查点之外运行，所以计算图保存了它们的激活值。{sequential}请把每一半放进它自己的检查点。",
    " `checkpoint_sequential` runs its last segment without a checkpoint.":
        "`checkpoint_sequential` 运行最后一段时不做检查点。",
    "backward ran no layer again: nothing was checkpointed.":
        "反向传播没有重新运行任何层：没有做任何检查点。",
    "backward ran layers {layers} again as one segment: that is one checkpoint around the whole model. Split the six layers into two halves and checkpoint each half on its own.":
        "反向传播把层 {layers} 作为一段重新运行：这是包住整个模型的一个检查点。请把六层分成两半，每一半单独做检查点。",
    "backward recomputed the layers in the segments {segments}; two halves of equal size are layers 0-2 and layers 3-5, each in its own checkpoint.":
        "反向传播按分段 {segments} 重新计算了各层；大小相等的两半是第 0-2 层和第 3-5 层，各自位于自己的检查点中。",
    "saved_tensors_hooks that keep float32 saved tensors in half precision":
        "用 `saved_tensors_hooks` 把为反向传播保存的 float32 张量以半精度存放",
    "return a pair (pack, unpack) of functions, as a tuple or a list.":
        "请以元组或列表的形式返回一对函数 (pack, unpack)。",
    "the graph keeps {total:,} bytes; float16 copies of what it saves weigh {halves:,}. pack should return a new float16 copy of the tensor, not the tensor itself or a float32 copy.":
        "计算图保存了 {total:,} 字节；它所保存内容的 float16 副本只有 {halves:,} 字节。pack 应返回张量的一个新的 float16 副本，而不是张量本身或 float32 副本。",
    "pack kept tensors of dtype {dtypes}. The question asks for half precision, float16 (`torch.half`), for every saved tensor. (bfloat16 is another 16-bit format, with fewer digits.)":
        "pack 保留的张量的 dtype 是 {dtypes}。题目要求每个为反向传播保存的张量都用半精度，即 float16（`torch.half`）。（bfloat16 是另一种 16 位格式，有效数字更少。）",
    "after the forward pass, float32 tensors that pack was given are still in memory: your hooks keep them (in a dict, a list or a closure). Then the float16 copies save nothing. pack should return only the float16 copy; unpack should make a float32 tensor from that copy.":
        "前向传播之后，交给 pack 的 float32 张量仍留在内存中：你的钩子保留了它们（在字典、列表或闭包中）。这样 float16 副本就节省不了任何内存。pack 应只返回 float16 副本；unpack 应由这个副本生成一个 float32 张量。",
    "backward failed ({error}): unpack gave it a tensor of another dtype than the one that was saved. unpack should turn the float16 copy back into float32.":
        "反向传播失败（“{error}”）：unpack 交给它的张量的 dtype 与保存时不同。unpack 应把 float16 副本转换回 float32。",
    "the gradients are not float32: unpack should give backward a tensor of the dtype that was saved.":
        "梯度不是 float32：unpack 交给反向传播的张量应与保存时的 dtype 相同。",
    "the gradients are far from the plain model's: unpack should give back the saved values, not zeros or new tensors.":
        "梯度与普通模型的相差很远：unpack 应返回保存的值，而不是零或新的张量。",
    "the gradients are exactly the plain model's, without the small errors of float16: backward got float32 values that pack kept on the side. pack should return only the float16 copy; unpack should make a float32 tensor from that copy.":
        "梯度与普通模型的完全相同，没有 float16 带来的微小误差：反向传播拿到的是 pack 另外保存的 float32 值。pack 应只返回 float16 副本；unpack 应由这个副本生成一个 float32 张量。",
    # nb12.py
    "what all-reduce leaves on every rank, simulated in one process":
        "在一个进程中模拟全归约在每个进程（rank）上留下的结果",
    "count the op nodes backward ran while each bucket's all-reduce was under way":
        "数一数每个桶的全归约进行期间，反向传播运行了多少个操作节点",
    "gradient accumulation under DDP: one all-reduce for several micro-batches":
        "DDP 下的梯度累积：几个微批次只做一次全归约",
    "return a dict from each parameter's name (as model.named_parameters() names it) to its gradient.":
        "请返回一个字典：键是每个参数的名字（与 `model.named_parameters()` 给出的相同），值是它的梯度。",
    "with world={world} each of the {world} ranks runs the model on its own {rows} rows; your answer ran it on batches of {sizes}. Split x and y into world equal parts.":
        "当 `world={world}` 时，{world} 个进程各自在自己的 {rows} 行上运行模型；你的答案运行的批次大小是 {sizes}。请把 `x` 和 `y` 分成 `world` 个相等的部分。",
    "with world={world} the gradient of {name} should equal the whole batch's gradient; it is {ratio:.2f} times as long. Each rank's loss is the mean over its rows, and all-reduce then averages over the ranks: divide the sum by world.":
        "当 `world={world}` 时，{name} 的梯度应等于整个批次的梯度；而它的长度是后者的 {ratio:.2f} 倍。每个进程的损失是它那几行的平均值，全归约再在各进程之间取平均：请把总和除以 `world`。",
    "return a dict from each launch's bucket index (launch.bucket) to a count; got {type}.":
        "请返回一个字典：键是每次启动的桶编号（`launch.bucket`），值是一个计数；你返回的是 {type}。",
    "for launches at positions {afters} of {n} node runs the counts are {want}; you gave {got}. Count only the node runs after position launch.after, and only op nodes: an AccumulateGrad (kind 'parameter') computes nothing.":
        "在 {n} 次节点运行中，启动位置为 {afters} 时，计数应为 {want}；你给出的是 {got}。只数位置 `launch.after` 之后的节点运行，并且只数操作节点：`AccumulateGrad`（`kind == 'parameter'`）不做计算。",
    "run the model once per micro-batch: {n} forwards, not {got}.":
        "每个微批次运行一次模型：应有 {n} 次前向计算，而不是 {got} 次。",
    "call backward() once per micro-batch: {n} backward passes, not {got}. A summed loss with one backward keeps every micro-batch's graph in memory at once.":
        "每个微批次调用一次 `backward()`：应有 {n} 次反向传播，而不是 {got} 次。把损失加起来只做一次反向传播，会让所有微批次的计算图同时留在内存里。",
    "DDP launched no all-reduce: the ranks never exchanged gradients. Run the last micro-batch's backward outside model.no_sync().":
        "DDP 没有启动任何全归约：各进程从未交换梯度。请在 `model.no_sync()` 之外运行最后一个微批次的反向传播。",
    "all-reduces were launched after forwards {launched}: only the last micro-batch's backward should launch one. Run the others inside `with model.no_sync():` (forward and backward).":
        "全归约在第 {launched} 次前向计算之后启动：只有最后一个微批次的反向传播应启动全归约。请把其他微批次放在 `with model.no_sync():` 中运行（前向和反向都要放进去）。",
    "{name}.grad is None: call backward() on each micro-batch's loss.":
        "{name}.grad 是 None：请对每个微批次的损失调用 `backward()`。",
    "{name}.grad should be the gradient of the mean of the micro-batches' losses; it is {ratio:.2f} times as long. backward() adds into .grad: divide each loss by the number of micro-batches.":
        "{name}.grad 应是各微批次损失的平均值的梯度；而它的长度是后者的 {ratio:.2f} 倍。`backward()` 会累加到 `.grad` 中：请把每个损失除以微批次的数量。",
    # nb10.py: forward mode and the graph of a gradient
    'J @ v with dual tensors (forward mode)':
        '用对偶张量计算 J @ v（前向模式）',
    'the Jacobian row by row: one forward pass, one backward pass per output':
        '逐行求雅可比矩阵：一次前向传播，每个输出一次反向传播',
    'a gradient penalty you can backpropagate (double backward)':
        '可以反向传播的梯度惩罚（二次反向传播）',
    'your answer changed the x it was given: work on a copy that requires grad, x.detach().requires_grad_().':
        '你的答案改动了传入的 x：请在一个需要梯度的副本上计算，即 x.detach().requires_grad_()。',
    'return one number as a 0-dim tensor (the mean over the samples), not {what}.':
        '请返回一个 0 维张量表示的数（对样本取平均），而不是 {what}。',
    'the penalty has no graph, so training cannot backpropagate it: pass create_graph=True to torch.autograd.grad, so that the slopes are computed with a graph.':
        '惩罚项没有计算图，所以训练无法对它反向传播：请给 torch.autograd.grad 传入 create_graph=True，让斜率在计算时也建立计算图。',
    "the penalty is {got:.4g}, the check computes {want:.4g}: the slope of each sample is the gradient of model(x).sum() with respect to x (one row per sample); take each row's norm, subtract 1, square, and average.":
        '惩罚项是 {got:.4g}，检查算出的是 {want:.4g}：每个样本的斜率是 model(x).sum() 对 x 的梯度（每个样本一行）；对每一行取范数，减 1，平方，再取平均。',
    "the penalty's gradients for the weights differ from torch.func's: the slopes must come from the same model(x) the penalty is for, with create_graph=True.":
        '惩罚项对权重的梯度与 torch.func 算出的不同：斜率必须来自惩罚项所针对的同一个 model(x)，并使用 create_graph=True。',
    "return a tensor (the tangent of f's output), not {type}: unpack_dual(out) gives (primal, tangent), and the tangent is None once dual_level() has ended.":
        '请返回一个张量（f 的输出的切向量），而不是 {type}：unpack_dual(out) 给出 (primal, tangent)，而 dual_level() 结束后切向量就是 None。',
    'for an f with {n} inputs and {m} outputs, J @ v has {m} numbers; you returned shape {shape}. v @ J (reverse mode, vjp) would have {n}.':
        '对于有 {n} 个输入、{m} 个输出的 f，J @ v 有 {m} 个数；你返回的形状是 {shape}。v @ J（反向模式，vjp）才有 {n} 个数。',
    'f never received a dual tensor: J @ v was not computed in forward mode (a full Jacobian from jacobian() or jacrev is reverse mode). Inside fwAD.dual_level(), make x carry the tangent v with fwAD.make_dual(x, v), call f, and read the tangent of its output with fwAD.unpack_dual.':
        'f 从未收到对偶张量：J @ v 不是用前向模式算出的（用 jacobian() 或 jacrev 算完整的雅可比矩阵属于反向模式）。在 fwAD.dual_level() 中，用 fwAD.make_dual(x, v) 让 x 携带切向量 v，调用 f，再用 fwAD.unpack_dual 读出其输出的切向量。',
    'you returned f(x), the primal: the tangent is the second part of fwAD.unpack_dual(out).':
        '你返回的是 f(x)，即原始值：切向量是 fwAD.unpack_dual(out) 的第二部分。',
    'the result differs from J @ v (J from torch.autograd.functional.jacobian): make_dual(x, v) takes the point first and the direction second.':
        '结果与 J @ v 不同（J 由 torch.autograd.functional.jacobian 算出）：make_dual(x, v) 先接收点，再接收方向。',
    'return the Jacobian as one tensor of shape (outputs, inputs) = ({m}, {n}); you returned {what}. torch.stack(rows) stacks the rows.':
        '请把雅可比矩阵作为一个形状为（输出数，输入数）=（{m}, {n}）的张量返回；你返回的是 {what}。torch.stack(rows) 可以把各行堆叠起来。',
    'no backward pass ran: that is forward mode (jacfwd or jvp), one pass per input. Build each row with the function vjp returns.':
        '没有运行任何反向传播：这是前向模式（jacfwd 或 jvp），每个输入一次传播。请用 vjp 返回的函数构造每一行。',
    'f ran {k} times for {m} rows: call vjp(f, x) once, then call the function it returns once per row, with a one-hot vector (a row of torch.eye(m)).':
        '为了 {m} 行，f 运行了 {k} 次：请只调用一次 vjp(f, x)，然后对每一行用一个独热向量（torch.eye(m) 的一行）调用一次它返回的函数。',
    '{k} backward passes ran for {m} rows: each row is one vector-Jacobian product, its own backward pass (jacrev without chunk_size batches them into one with vmap).':
        '为了 {m} 行，运行了 {k} 次反向传播：每一行是一个向量-雅可比积，各自一次反向传播（不带 chunk_size 的 jacrev 会用 vmap 把它们合成一次）。',
    'you returned the transpose: row i of J is u @ J for u the i-th one-hot vector.':
        '你返回的是转置：J 的第 i 行是 u @ J，其中 u 是第 i 个独热向量。',
    'the rows differ from the Jacobian: row i is pullback(e_i) with e_i the i-th row of torch.eye(m), m the number of outputs.':
        '各行与雅可比矩阵不同：第 i 行是 pullback(e_i)，其中 e_i 是 torch.eye(m) 的第 i 行，m 是输出个数。',
    'backpropagating your penalty failed: {message}':
        '对你的惩罚项反向传播失败：{message}',
    # nb11.py
    "an MLP 8-16-4":
        "一个 8-16-4 的 MLP",
    "an MLP whose first layer is frozen (requires_grad=False)":
        "一个第一层被冻结（requires_grad=False）的 MLP",
    "an MLP in float64":
        "一个 float64 的 MLP",
    "the bytes of Adam's state, from the parameters alone":
        "只凭参数算出 Adam 状态的字节数",
    "your answer ran a backward pass: count from the parameters alone.":
        "你的答案运行了一次反向传播：请只凭参数来计算。",
    "for {case} Adam keeps {want:,} bytes of state; you counted {got:,}. For each parameter that trains, Adam keeps exp_avg and exp_avg_sq (each the parameter's size, in its dtype) and a 0-dim float32 step count. A frozen parameter gets no gradient and no state.":
        "对于{case}，Adam 保存了 {want:,} 字节的状态；你算出的是 {got:,}。对每个参与训练的参数，Adam 保存 exp_avg 和 exp_avg_sq（大小都与参数相同，数据类型也相同），以及一个 0 维 float32 的步数。被冻结的参数没有梯度，也没有状态。",
    "one float16 training step with GradScaler":
        "用 GradScaler 做一步 float16 训练",
    "the scale after each step was {got}; GradScaler gives {want}. At the first scale, 2**36, some scaled gradients overflow float16, so scaler.step skips that step and scaler.update() halves the scale once. Call scaler.update() after scaler.step(opt), and compute the loss in float32 (out.float()): a float16 loss times the scale overflows at every step.":
        "每一步之后的缩放因子是 {got}；GradScaler 给出的是 {want}。第一次的缩放因子是 2**36，这时一些缩放后的梯度在 float16 中上溢，所以 scaler.step 跳过这一步，scaler.update() 把缩放因子减半一次。请在 scaler.step(opt) 之后调用 scaler.update()，并用 float32 计算损失（out.float()）：float16 的损失乘以缩放因子，每一步都会上溢。",
    "the parameters changed at steps {got} (True: changed); with GradScaler they change at {want}: a step whose gradients hold inf or NaN is skipped. Step through scaler.step(opt), not opt.step().":
        "参数在这些步中发生了变化：{got}（True 表示变了）；用 GradScaler 时应为 {want}：梯度中含有 inf 或 NaN 的一步会被跳过。请通过 scaler.step(opt) 更新，而不是 opt.step()。",
    "the parameters differ from GradScaler's recipe: zero the gradients, run the forward under torch.autocast('cpu', dtype=torch.float16), compute the loss in float32, backward on scaler.scale(loss), then scaler.step(opt) and scaler.update().":
        "参数与 GradScaler 的标准做法得到的不同：先清零梯度，在 torch.autocast('cpu', dtype=torch.float16) 下运行前向传播，用 float32 计算损失，对 scaler.scale(loss) 做反向传播，然后调用 scaler.step(opt) 和 scaler.update()。",
    "an SGD step inside backward that frees each gradient":
        "在反向传播中做 SGD 更新并释放每个梯度",
    "return the list of hook handles (what register_post_accumulate_grad_hook returns), so that the hooks can be removed.":
        "请返回钩子句柄的列表（register_post_accumulate_grad_hook 的返回值），以便之后移除这些钩子。",
    "registering the hooks should not run backward: the gradients must still be None.":
        "注册钩子时不应运行反向传播：梯度必须仍是 None。",
    "after backward some .grad is still set: the hook should free each gradient once it has used it (p.grad = None).":
        "反向传播之后仍有 .grad 没有释放：钩子用完每个梯度后应释放它（p.grad = None）。",
    "the parameters after backward are not p - lr * p.grad: update each parameter in its hook, in place, under torch.no_grad().":
        "反向传播之后的参数不等于 p - lr * p.grad：请在每个参数的钩子中，在 torch.no_grad() 下原地更新它。",
    "all the gradients were alive at once ({most:,} bytes): free each one in its own hook.":
        "所有梯度曾同时存活（{most:,} 字节）：请在各自的钩子中释放每个梯度。",
}
