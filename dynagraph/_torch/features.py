"""The torch internals dynagraph reads: each private attribute's name, what the picture
loses without it, and the one warning each missing feature gives."""

from __future__ import annotations

import warnings

import torch

__all__ = ["BACKWARD_CLASS", "CHECKPOINT_ARGS", "CHECKPOINT_HOLDER", "ENGINE_ENTRY", "FEATURES",
           "FORWARD_CLS", "GRAPH_TASK_ID", "INPUT_METADATA", "METADATA", "MISSING", "ORIG_MOD", "RAW_SAVED",
           "RAW_SAVED_CUSTOM", "SAVED", "SEQUENCE_NR", "missing"]

# Private attribute names, each written once here. The other rooms read them as
# ``features.NAME`` when called, so a test that renames one here plays a torch release
# that dropped it.
BACKWARD_CLASS = "BackwardCFunction"  # torch.autograd.function: custom Functions' node class
FORWARD_CLS = "_forward_cls"  # on that class: the user's Function subclass
INPUT_METADATA = "_input_metadata"  # shape/dtype/device of the forward outputs
SEQUENCE_NR = "_sequence_nr"  # autograd's per-thread creation counter
METADATA = "metadata"  # a dict per node that outlives its Python wrapper
SAVED = "_saved_"  # prefix of the saved-for-backward attributes of built-in nodes
RAW_SAVED = "_raw_saved_"  # the same, as SavedTensor objects (no unpack hook runs)
RAW_SAVED_CUSTOM = "_raw_saved_tensors"  # a custom Function's ctx.saved_tensors, raw
CHECKPOINT_HOLDER = "_Holder"  # torch.utils.checkpoint: what a non-reentrant region's nodes keep
CHECKPOINT_ARGS = "saved_args"  # on its frame (closed over by the unpack hook): the region's inputs
ORIG_MOD = "_orig_mod"  # on what torch.compile(model) returns: the model itself
ENGINE_ENTRY = "_engine_run_backward"  # torch.autograd: what backward() and grad() call to run the engine
GRAPH_TASK_ID = "_current_graph_task_id"  # torch._C: the id of the backward pass now running

# What the picture loses, or how dynagraph copes, without each feature.
FEATURES = {
    "BackwardCFunction": "custom Functions are recognised by their _forward_cls attribute instead",
    "_forward_cls": "custom Function nodes are labelled with their node name, not their class",
    "_input_metadata": "op nodes show no shape, dtype or device",
    "_sequence_nr": "ops are ordered by discovery; track_modules and live() cannot tag modules",
    "_current_graph_task_id": ("trace_backward tells passes apart by their end alone: a pass that "
                               "raised runs on into the next"),
    "_engine_run_backward": "track_passes cannot see the backward passes: no node gets a derivative order",
    "metadata": "nodes carry no module tags (no grouping by module)",
    "_saved_": "show_saved lists nothing for built-in ops",
    "_raw_saved_": "memory=True counts nothing (saved tensors cannot be read without unpacking)",
    "checkpoint saved_args": "memory=True does not count a non-reentrant checkpoint region's inputs",
    "get_gradient_edge": "a leaf root's node is found through a view of it instead",
    "_foreach_norm": "gradient norms are computed one tensor at a time",
    "Function.apply": "live() records a custom Function's inner ops, not one apply step",
    "compiled_autograd": "memory=True does not count what an in-place op on a view (CopySlices) saved",
    "memory profiler": "dg.step_memory cannot run (it reads the categories of PyTorch's memory profiler)",
}
MISSING: set[str] = set()  # features this torch lacks, found so far (each warned about once)


def missing(feature: str) -> None:
    """Note that ``feature`` is missing; warn the first time, naming it and the torch version."""
    if feature in MISSING:
        return
    MISSING.add(feature)
    warnings.warn(f"dynagraph: torch {torch.__version__} has no {feature}: {FEATURES[feature]}",
                  RuntimeWarning, stacklevel=3)
