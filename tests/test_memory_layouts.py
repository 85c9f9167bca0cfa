"""draw(memory=True) on tensors that are not plain strided ones (issue 19): sparse
layouts weigh their indices and values, meta tensors their size (never merged by their
zero data pointer), nested and quantized tensors what they hold. The oracle is the one
of test_memory: what saved_tensors_hooks sees packed, by the same rule; for sparse
layouts also the analytic size."""

import warnings

import pytest
import torch
from test_memory import SPARSE_PARTS, packed_storages

import dynagraph as dg


class Keep(torch.autograd.Function):
    """x * 1, keeping ``kept`` (any tensor) for backward as a custom Function may."""

    @staticmethod
    def forward(ctx, x, kept):
        ctx.save_for_backward(kept)
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def sparse_matrix(layout):
    """A 2,000 x 2,000 matrix with about 4,000 non-zeros in ``layout``."""
    torch.manual_seed(0)
    coo = torch.sparse_coo_tensor(torch.randint(0, 2000, (2, 4000)), torch.randn(4000), (2000, 2000))
    if layout == torch.sparse_coo:
        return coo
    dense = coo.to_dense()
    blocked = {torch.sparse_bsr: dense.to_sparse_bsr, torch.sparse_bsc: dense.to_sparse_bsc}
    converted = blocked[layout]((4, 4)) if layout in blocked else dense.to_sparse(layout=layout)
    return converted.clone()  # converted, its column indices are a view of a twice-longer buffer


def matmul(layout):
    """sparse @ dense: the node saves the sparse matrix for the dense one's gradient."""
    s, d = sparse_matrix(layout), torch.randn(2000, 3, requires_grad=True)
    return lambda: (s @ d).sum()


def kept_by_custom(layout):
    """A custom Function keeping a sparse matrix (any layout, bsc included)."""
    s, x = sparse_matrix(layout), torch.ones(3, requires_grad=True)
    return lambda: Keep.apply(x, s).sum()


def sparse_leaf():
    torch.manual_seed(0)
    s = torch.sparse_coo_tensor(torch.randint(0, 1000, (2, 300)), torch.randn(300), (1000, 1000),
                                requires_grad=True)
    return lambda: torch.sparse.sum(s * s)


def meta():
    m = torch.empty(1000, 2, device="meta", requires_grad=True)  # 8,000 bytes if it were real
    return lambda: (m.exp() * m.sin()).sum()


def nested(layout):
    torch.manual_seed(0)
    nt = torch.nested.nested_tensor([torch.randn(3, 4), torch.randn(5, 4)], layout=layout,
                                    requires_grad=True)
    if layout == torch.jagged:
        return lambda: nt.sin().values().sum()
    return lambda: torch.nested.to_padded_tensor(nt.sin(), 0.0).sum()


def quantized():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized creation functions are deprecated
        q = torch.quantize_per_tensor(torch.randn(1000), 0.1, 0, torch.qint8)
    x = torch.ones(3, requires_grad=True)
    return lambda: Keep.apply(x, q).sum()


def empty():
    z = torch.zeros(0, requires_grad=True)
    return lambda: (z.exp() * z.sin()).sum()


CASES = {**{f"matmul_{str(k).removeprefix('torch.sparse_')}": (lambda k=k: matmul(k))
            for k in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr)},
         **{f"kept_{str(k).removeprefix('torch.sparse_')}": (lambda k=k: kept_by_custom(k))
            for k in SPARSE_PARTS},
         "sparse_leaf": sparse_leaf, "meta": meta, "nested_jagged": lambda: nested(torch.jagged),
         "nested_strided": lambda: nested(torch.strided), "quantized": quantized, "empty": empty}


@pytest.mark.parametrize("case", sorted(CASES))
def test_total_equals_what_the_packed_tensors_hold(case):
    run = CASES[case]()
    hooked, seen = packed_storages(run)
    mem = dg.draw(hooked, memory=True).memory
    assert mem.total == sum(seen.values())
    assert set(mem.storages()) == set(seen)  # the same storages, each once
    assert dg.draw(run(), memory=True).memory.total == sum(seen.values())  # without hooks


@pytest.mark.parametrize("layout", sorted(SPARSE_PARTS, key=str), ids=str)
def test_sparse_tensors_weigh_their_indices_and_values(layout):
    s = sparse_matrix(layout)
    parts = [getattr(s, name)() for name in SPARSE_PARTS[layout]]
    analytic = sum(p.numel() * p.element_size() for p in parts)
    mem = dg.draw(kept_by_custom(layout)(), memory=True).memory
    assert mem.total == analytic < 2000 * 2000 * 4 // 10  # dense would be 16 MB
    assert mem.parameters_and_inputs == analytic  # made without grad: an input


def test_issue_19_sparse_coo_is_not_weighed_as_dense():
    mem = dg.draw(matmul(torch.sparse_coo)(), memory=True).memory
    assert mem.total == 4000 * 2 * 8 + 4000 * 4  # int64 indices, float32 values: 80 KB, not 16 MB


def test_meta_tensors_weigh_their_size_and_are_never_merged_by_pointer():
    mem = dg.draw(meta()(), memory=True).memory
    assert mem.activations == 2 * 8000  # exp(m) and sin(m)
    assert mem.parameters_and_inputs == 8000  # m itself
    assert len(mem.storages()) == 3


def test_a_view_of_a_meta_tensor_is_its_storage():
    m = torch.empty(10, 100, device="meta", requires_grad=True)
    h = m.exp()  # 4,000 bytes if it were real; saved by exp, and viewed twice
    mem = dg.draw((h[0].sin() + h[1:].cos().sum(0)).sum(), memory=True).memory
    assert mem.activations == mem.total == 4000  # h once, though its views are saved apart
