"""Chinese translations of the package's learner-facing messages (see :mod:`dynagraph._language`).

Keys are the English messages exactly as the code passes them to ``tr`` (or marks with ``N_``);
names in braces stay as they are. ``tests/test_language.py`` checks that every message has one
entry here and every entry a message.

Terms follow the Chinese column of ``notebooks/glossary.md`` (d2l-zh's usage); op, module and
parameter names, shapes, numbers and code stay in English, with a space between them and the
Chinese around them.
"""
# ruff: noqa: E501 - one message per line, so that grep on a message's English text finds its entry

MESSAGES: dict[str, str] = {
    # _steps.py: the step list that needs no script
    "The picture cannot step here. In Jupyter, once this cell has run or the notebook is trusted, it plays its {n} steps.":
        "这里的图不能逐步播放。在 Jupyter 中，运行本单元格或信任此笔记本之后，图会逐步播放这 {n} 步。",
    "The picture cannot step here. In Jupyter, once this cell has run or the notebook is trusted, it plays its 1 step.":
        "这里的图不能逐步播放。在 Jupyter 中，运行本单元格或信任此笔记本之后，图会播放这 1 步。",
    "The output holds the first {first} and the last {last} of the {n} steps, so that it stays small.":
        "为了不让输出过大，这 {n} 步中输出只保存了前 {first} 步和最后 {last} 步。",
    "\u2026 and {more} more steps":
        "……还有 {more} 步",
    "\u2026 and 1 more step":
        "……还有 1 步",
    "the graph keeps {bytes} for backward":
        "计算图为反向传播保留了 {bytes}",
    # _settings.py: set_language("zh") without the font's wheel
    "Chinese text in plots and picture titles needs a font that has its glyphs: {install} (Noto Sans SC), then restart the kernel. Until then it shows as boxes.":
        "图表和图片标题里的中文需要有中文字形的字体：请运行 {install}（Noto Sans SC），然后重启内核。在此之前，中文会显示成方框。",
    # _page.py: a node's details on hover
    "{name} ({kind})":
        "{name}（{kind}）",
    "op":
        "操作",
    "custom":
        "自定义",
    "parameter":
        "参数",
    "input":
        "输入",
    "output":
        "输出",
    "module":
        "模块",
    "fold":
        "折叠",
    # diff.py: the title of a diff's picture (drawn outside Graphviz when it holds Chinese)
    "{b}: new vs {a} in red":
        "{b}：红框标出相对于 {a} 新增的节点",
    # memory.py: the summary (printed, and drawn above a picture outside Graphviz)
    "saved tensors freed by backward(): the graph keeps nothing alive":
        "backward() 已释放保存的张量：计算图不再占用内存",
    "keeps {total} alive for backward ({act} activations, {leaf} parameters and inputs{more})":
        "计算图为反向传播保留了 {total}（激活值 {act}，参数和输入 {leaf}{more}）",
    "; {n} checkpointed nodes recomputed in backward":
        "；检查点中的 {n} 个节点在反向传播时重算",
    "; not counted: what {n} in-place ops on views saved under saved_tensors_hooks":
        "；未计入：{n} 个视图上的原地操作在 saved_tensors_hooks 下保存的张量",
    "In a node: the bytes it saved for backward (after +: parameters and inputs)":
        "节点中的数字：该节点为反向传播保存的字节数（+ 之后是参数和输入）",
    "In a node: the bytes it saved for backward (after +: parameters and inputs; 0 B (checkpoint): recomputed in backward)":
        "节点中的数字：该节点为反向传播保存的字节数（+ 之后是参数和输入；0 B (checkpoint)：反向传播时重算）",
    # Drawn by Graphviz, which has no Chinese glyphs: no words (DRAWN_BY_GRAPHVIZ)
    "saved: freed":
        "0 B",
    "keeps nothing: recomputed in backward":
        "0 B (checkpoint)",
    "saves {leaf} of params/inputs":
        "+ {leaf}",
    "saves {act} + {leaf} params/inputs":
        "{act} + {leaf}",
    "saves {act}":
        "{act}",
    " (all \u00d7{n} iterations)":
        " (\u00d7{n})",
    "step {first}\u2013{last}":
        "#{first}\u2013{last}",
    "\u2016tangent\u2016 along the loop, iteration 1\u2192{n}: {line}":
        "\u2016t\u2016 #1\u2192{n}: {line}",
    "\u2016grad\u2016 along the loop, iteration 1\u2192{n}: {line}":
        "\u2016g\u2016 #1\u2192{n}: {line}",
    "module: {module}":
        "模块：{module}",
    "tensor: {shape} {dtype} {device}":
        "张量：{shape} {dtype} {device}",
    "saved {name}: {value}":
        "保存的“{name}”：{value}",
    "made by: the {name} pass":
        "由{name}创建",
    # passes.py and _dot.py: the pass that made a node (hover details, the picture's legend,
    # a title line: views draw it outside Graphviz when it holds Chinese)
    "forward":
        "前向传播",
    "first backward":
        "第一次反向传播",
    "second backward":
        "第二次反向传播",
    "third backward":
        "第三次反向传播",
    "{order}th backward":
        "第 {order} 次反向传播",
    "outline: plain = forward":
        "边框：默认 = 前向传播",
    ", {colour} = {name}":
        "，{colour} = {name}",
    "purple":
        "紫色",
    "teal":
        "青绿色",
    "orange":
        "橙色",
    "drawn once for {n} iterations":
        "只画一次，代表 {n} 次迭代",
    "iteration: node":
        "迭代：节点",
    "\u2026 and {n} more":
        "……还有 {n} 个",
    # _page.py: the words of view.js's bar (buttons, their tooltips, the stepper's lines)
    "\u2039 prev":
        "\u2039 上一步",
    "play":
        "播放",
    "next \u203a":
        "下一步 \u203a",
    "fit":
        "适应宽度",
    "first step":
        "第一步",
    "previous step":
        "上一步",
    "play or pause":
        "播放或暂停",
    "next step":
        "下一步",
    "last step":
        "最后一步",
    "zoom out":
        "缩小",
    "fit the picture to the width":
        "按宽度缩放图片",
    "actual size":
        "原始大小",
    "zoom in":
        "放大",
    "the step shown":
        "当前显示的步骤",
    "step {k} / {n}":
        "第 {k} / {n} 步",
    "iteration {k} of {n}":
        "第 {k} 次迭代（共 {n} 次）",
    # _steps.py and diff.py: a diff's table
    "node":
        "节点",
    "change":
        "变化量",
    "total":
        "总计",
    "not placed: {count} new of the {n} {name} marked ?":
        "无法定位：标有 ? 的 {n} 个 {name} 中有 {count} 个是新增的",
    # _source.py: where a step's line is (Step.where stays English; steps show it so)
    "this cell, line {line}":
        "本单元格，第 {line} 行",
    "cell defining {name}, line {line}":
        "定义 {name} 的单元格，第 {line} 行",
    "another cell, line {line}":
        "另一个单元格，第 {line} 行",
    # live.py: a recording's steps and its step list's heading
    "{n} nodes":
        "{n} 个节点",
    "{first}, \u2026 ({n} nodes)":
        "{first}, …（共 {n} 个节点）",
    "\u2026({n} characters)":
        "…（共 {n} 个字符）",
    "no node ({note})":
        "没有节点（{note}）",
    " in {module}":
        " 位于 {module}",
    " ({kind})":
        "（{kind}）",
    "{n} steps":
        "{n} 步",
    "1 step":
        "1 步",
    "; {n} nodes drawn faint do not feed the result of step {step} ({op}): rec.feeding(tensor) draws only what feeds a tensor":
        "；画成浅色的 {n} 个节点不参与计算第 {step} 步（{op}）的结果：rec.feeding(tensor) 只画出计算某个张量所用的部分",
    "; modules drawn as boxes (the picture of every op fills {n} screens at 1:1)":
        "；模块画成方框（每个操作都画出的图在 1:1 下占 {n} 屏）",
    ": where the picture's script runs, a click on a box opens its ops":
        "：在图的脚本运行之处，点击方框即可打开其中的操作",
    "; a module called more than once is one box per call (“call 1 of 2”)":
        "；调用了不止一次的模块每次调用画成一个方框（“call 1 of 2”）",
    "a click on a module box opens its ops":
        "点击模块方框即可打开其中的操作",
    "close":
        "关闭",
    # live.py: why an op made no node (Step.note stays English; steps show it so)
    "inference_mode":
        "处于 inference_mode 中",
    "grad disabled: torch.no_grad()":
        "梯度记录已关闭：torch.no_grad()",
    "a leaf: autograd records it where an op uses it":
        "叶子张量：自动微分在使用它的操作处记录它",
    "no input requires grad":
        "没有输入需要梯度",
    "integer or bool result: not differentiable":
        "结果是整数或布尔值：不可微",
    "no new node":
        "没有新节点",
    # backward.py: a backward trace's steps and heading
    "{leaf}.grad += the gradient":
        "{leaf}.grad += 梯度",
    "{leaf}.grad += the gradient from {n} uses":
        "{leaf}.grad += 来自 {n} 处使用的梯度",
    ", \u2016g\u2016 = {norms}":
        "，\u2016g\u2016 = {norms}",
    "{op} ran":
        "{op} 已运行",
    "{op} in {module} ran":
        "{module} 中的 {op} 已运行",
    ": gradient in, \u2016g\u2016 = {norms}":
        "：收到梯度，\u2016g\u2016 = {norms}",
    "backward: {runs}. The arrows point the way autograd sends gradients: from the output back to the inputs":
        "反向传播：{runs}。箭头指向自动微分传递梯度的方向：从输出回到输入",
    # timing.py: dg.compare's verdict line
    "timing: ":
        "计时：",
    # forward.py: a forward-mode trace's steps and caption
    "{leaf}: tangent in":
        "{leaf}：切向量输入",
    "{op} ran: tangent out":
        "{op} 已运行：切向量输出",
    ", \u2016t\u2016 = {norm}":
        "，\u2016t\u2016 = {norm}",
    "forward mode: {runs}. The arrows point the way tangents flow: from the inputs to the outputs":
        "前向模式：{runs}。箭头指向切向量流动的方向：从输入到输出",
    # _replay.py: how many nodes a backward or forward pass ran, in its caption and its repr
    "1 node run":
        "节点共运行 1 次",
    "{n} node runs":
        "节点共运行 {n} 次",
    "{verdict} ({times}; {how})":
        "{verdict}（{times}；{how}）",
    "{b} is {ratio}x faster than {a}":
        "{b} 的速度是 {a} 的 {ratio} 倍",
    "{b} is {ratio}x slower than {a}":
        "{b} 的耗时是 {a} 的 {ratio} 倍",
    "no clear difference here between {a} and {b} ({ratio}x)":
        "在这台机器上，{a} 和 {b} 之间没有明显差异，比值 {ratio}x",
    "{a} {time_a}, {b} {time_b} per call":
        "每次调用：{a} {time_a}，{b} {time_b}",
    "A/A noise up to {noise}x; {rounds} interleaved rounds, {threads} threads":
        "A/A 噪声最大 {noise}x；交替进行 {rounds} 轮，{threads} 个线程",
    "A/A noise up to {noise}x; {rounds} interleaved rounds, 1 thread":
        "A/A 噪声最大 {noise}x；交替进行 {rounds} 轮，1 个线程",
    "{how}, CPU time":
        "{how}，CPU 时间",
    # plots.py: titles, axis labels, legends and marks
    "gradient norm per module":
        "每个模块的梯度范数",
    "gradient norm per parameter":
        "每个参数的梯度范数",
    "gradient norm per module over steps":
        "每个模块的梯度范数随训练步的变化",
    "gradient norm per parameter over steps":
        "每个参数的梯度范数随训练步的变化",
    "gradient norm (log)":
        "梯度范数（对数坐标）",
    "log10 gradient norm":
        "梯度范数的 log10",
    "step":
        "训练步",
    "L2 norm":
        "L2 范数",
    "mean |grad|":
        "|grad| 的均值",
    "max |grad|":
        "|grad| 的最大值",
    "no grad":
        "无梯度",
    "no value":
        "无法读取",
    "zero":
        "零",
    "{shown} of {total} modules shown: the largest and smallest norms and any without one":
        "显示了 {total} 个模块中的 {shown} 个：范数最大和最小的，以及所有没有范数的",
    "{shown} of {total} parameters shown: the largest and smallest norms and any without one; per='module' combines them":
        "显示了 {total} 个参数中的 {shown} 个：范数最大和最小的，以及所有没有范数的；per='module' 会把它们按模块合并",
    "step {k}: {op} [{where}] {code}":
        "第 {k} 步：{op} [{where}] {code}",
    "{n} steps so far":
        "已记录 {n} 步",
    # ddp.py: a backward replay of a DistributedDataParallel model
    "bucket {k}":  # drawn by Graphviz in the parameter's box (DRAWN_BY_GRAPHVIZ): the bucket's index
        "[{k}]",
    "bucket {k} launched ({n} parameters): all-reduce of their gradients":
        "桶 {k} 已启动（{n} 个参数）：对它们的梯度做全归约",
    # memory.py: a mixed-precision graph's saved bytes by dtype (title and hover details)
    "by dtype: {sizes}":
        "按数据类型：{sizes}",
    ", ":
        "、",
    "saved {name}: {dtype}, {size}":
        "保存的“{name}”：{dtype}，{size}",
    "\u2026 and {n} more saved tensors":
        "\u2026\u2026另有 {n} 个保存的张量",
    # plots.py: a step's memory (step_memory): its phases, the kinds in its legend, its marks
    # ("forward" is above, with the pass names: 前向传播)
    "before the step":
        "这一步之前",
    "backward":
        "反向传播",
    "optimizer step":
        "优化器步",
    "after backward":
        "反向之后",
    "parameters":
        "参数",
    "gradients":
        "梯度",
    "optimizer state":
        "优化器状态",
    "inputs":
        "输入",
    "activations":
        "激活值",
    "temporaries":
        "临时张量",
    "other":
        "其他",
    "peak {bytes}":
        "峰值 {bytes}",
    "memory event (allocation or free) during the step":
        "这一步中的内存事件（分配或释放）",
    "bytes alive ({unit})":
        "存活的字节（{unit}）",
    "1 step so far":
        "已记录 1 步",
    # the reprs a notebook shows as text (print(graph), a cell's last value in a terminal)
    "<dynagraph.Graph: {nodes}, {edges} ({kinds}){rest}>":
        "<dynagraph.Graph：{nodes}，{edges}（{kinds}）{rest}>",
    "1 edge":
        "1 条边",
    "{n} edges":
        "{n} 条边",
    ", {block} \u00d7{n}":
        "，{block} \u00d7{n}",
    "; {summary}":
        "；{summary}",
    "<dynagraph.Recording: {steps}, {nodes}>":
        "<dynagraph.Recording：{steps}，{nodes}>",
    "1 node":
        "1 个节点",
    "... {n} more steps (rec.steps has them all) ...":
        "\u2026\u2026还有 {n} 步（全部步骤见 rec.steps）\u2026\u2026",
    "<dynagraph.BackwardTrace: {runs}, {norms}{notes}>":
        "<dynagraph.BackwardTrace：{runs}，{norms}{notes}>",
    "1 edge norm":
        "1 条边有范数",
    "{n} edge norms":
        "{n} 条边有范数",
    ", {n} without a norm (see .notes)":
        "，{n} 条没有范数（见 .notes）",
    "<dynagraph.ForwardTrace: {runs}, {tangents}>":
        "<dynagraph.ForwardTrace：{runs}，{tangents}>",
    "1 edge tangent":
        "1 条边带切向量",
    "{n} edge tangents":
        "{n} 条边带切向量",
    "<dynagraph.GradHistory: {steps} steps x {n} modules>":
        "<dynagraph.GradHistory：{steps} 个训练步 \u00d7 {n} 个模块>",
    "<dynagraph.GradHistory: {steps} steps x {n} parameters>":
        "<dynagraph.GradHistory：{steps} 个训练步 \u00d7 {n} 个参数>",
    "<dynagraph.StepMemory ({device}): peak {bytes} in the {phase}{op}, event {k} of {n}: {kinds}{cuda}>":
        "<dynagraph.StepMemory（{device}）：峰值 {bytes}，出现在{phase}{op}，即第 {k} 个内存事件（共 {n} 个）：{kinds}{cuda}>",
    ", in {op}":
        "（{op}）",
    "; allocator peak {bytes}":
        "；分配器峰值 {bytes}",
    # diff.py: the title of a diff's picture, when some new nodes could not be placed
    "; {n} more new, not placed, among those marked ?":
        "；标有 ? 的节点中另有 {n} 个是新增的，无法定位",
    # _picture.py: the title of a diff's picture, when some new nodes are inside drawn nodes that also stand for old ones
    "; {n} more new, not outlined: inside a rolled loop, a fold or a module box with old ones":
        "；另有 {n} 个新增节点未用红框标出：它们与旧节点同在一个只画一次的循环（×N）、折叠区或模块框中",
    # _png.py and _page.py: a view that had to be made smaller
    "Cropped: the top {shown} px of a {w} x {h} px picture. The whole picture shows in Jupyter once this cell has run or the notebook is trusted.":
        "已裁剪：显示 {w} x {h} 像素中最上面的 {shown} 像素。在 Jupyter 中运行此单元格或信任此笔记本后即可看到完整图片。",
    "\u2026 (cut to {n} characters of {total})":
        "\u2026（{total} 个字符中只保留前 {n} 个）",
}

# Messages Graphviz draws inside a picture (a node's saved bytes, a rolled block's steps):
# its renderer has no Chinese glyphs, so their "translations" use none (numbers and
# symbols), and the Chinese summary above the picture says what they mean.
DRAWN_BY_GRAPHVIZ = frozenset({
    "saved: freed", "keeps nothing: recomputed in backward", "saves {leaf} of params/inputs",
    "saves {act} + {leaf} params/inputs", "saves {act}", " (all \u00d7{n} iterations)",
    "step {first}\u2013{last}", "bucket {k}", "\u2016tangent\u2016 along the loop, iteration 1\u2192{n}: {line}",
    "\u2016grad\u2016 along the loop, iteration 1\u2192{n}: {line}",
})
