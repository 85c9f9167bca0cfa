"""Every torch internal dynagraph reads, each behind a feature check with a fallback.

The only module of dynagraph that reads torch's private attributes, in six rooms:
:mod:`.features` (each attribute's name, what is lost without it, the warning once),
:mod:`.nodes` (what a node tells: kind, output shape, creation counter, metadata),
:mod:`.saved` (what a node saved for backward, read without unpacking), :mod:`.deep`
(deep graphs freed node by node), :mod:`.hooks` (modes, the engine's entry, forward
hooks, ``torch.compile``'s modules and frames) and :mod:`.training` (DDP's buckets, the
fused norm, the memory profiler). The rest of dynagraph reads them as ``_torch.name``.

State lives in its room and is not re-exported: ``features.MISSING`` (the features
found missing so far), the attribute names (which tests rename there to play a torch
without one), and :mod:`.deep`'s held graphs.
"""

from __future__ import annotations

from .deep import SAFE_DEPTH, hold_deep_graph, keep_wrappers, release_pending
from .features import FEATURES
from .hooks import (
    DYNAMO_DIR,
    compiled_graph_frame,
    engine_entry,
    graph_task_id_reader,
    has_patchable_apply,
    mode_stack_len,
    no_torch_function,
    original_module,
    own_parameters,
    pop_mode,
    push_mode,
    queue_engine_callback,
    remove_global_module_hooks,
    remove_module_hooks,
    set_engine_entry,
)
from .nodes import (
    GradFn,
    custom_name,
    gradient_edge_node,
    is_custom,
    metadata,
    output_meta,
    sequence_nr,
    shape_of,
    shapes_of,
    version_of,
)
from .saved import (
    FREED,
    checkpoint_inputs,
    is_saved_output,
    lifted_saved,
    packed_of,
    raw_saved_values,
    saved_values,
    storage_key,
    storage_of,
)
from .training import (
    ddp_buckets,
    ddp_logging_data,
    foreach_norm,
    has_foreach_norm,
    memory_events,
    profiler_running,
)

__all__ = [
    "DYNAMO_DIR",
    "FEATURES",
    "FREED",
    "SAFE_DEPTH",
    "GradFn",
    "checkpoint_inputs",
    "compiled_graph_frame",
    "custom_name",
    "ddp_buckets",
    "ddp_logging_data",
    "engine_entry",
    "foreach_norm",
    "gradient_edge_node",
    "graph_task_id_reader",
    "has_foreach_norm",
    "has_patchable_apply",
    "hold_deep_graph",
    "is_custom",
    "is_saved_output",
    "keep_wrappers",
    "lifted_saved",
    "memory_events",
    "metadata",
    "mode_stack_len",
    "no_torch_function",
    "original_module",
    "output_meta",
    "own_parameters",
    "packed_of",
    "pop_mode",
    "profiler_running",
    "push_mode",
    "queue_engine_callback",
    "raw_saved_values",
    "release_pending",
    "remove_global_module_hooks",
    "remove_module_hooks",
    "saved_values",
    "sequence_nr",
    "set_engine_entry",
    "shape_of",
    "shapes_of",
    "storage_key",
    "storage_of",
    "version_of",
]
