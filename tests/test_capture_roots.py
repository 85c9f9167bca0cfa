"""capture.named_roots: what draw() says about roots autograd cannot have drawn."""

import pytest
import torch

import dynagraph as dg


@pytest.mark.parametrize("root", [torch.arange(3), torch.ones(2, dtype=torch.int32), torch.ones(2) > 0],
                         ids=["int64", "int32", "bool"])
def test_draw_integer_or_bool_tensor_says_it_is_not_differentiable(root):
    with pytest.raises(ValueError, match=rf"root 'output' has dtype {root.dtype}: integer and bool tensors "
                                         r"are not differentiable.*Draw a float tensor instead"):
        dg.draw(root)


def test_draw_float_tensor_without_grad_still_says_make_inputs_require_grad():
    with pytest.raises(ValueError, match=r"root 'y' has no grad_fn .* Make its inputs require grad"):
        dg.draw({"y": torch.ones(2)})


def test_draw_integer_tensor_in_a_list_names_it():
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match=r"root 'output\[1\]' has dtype torch.int64"):
        dg.draw([x.sum(), x.argmax()])
