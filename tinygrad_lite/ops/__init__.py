"""The op families of Tensor, one file each, every op's forward and backward side by side:

    unary.py     elementwise math: exp log sqrt sin cos abs tanh sigmoid relu gelu clamp neg
    binary.py    broadcasting arithmetic (+ - * / **), maximum minimum, comparisons, matmul
    reduce.py    sum mean var std max min argmax argmin logsumexp
    movement.py  reshape permute transpose squeeze expand, indexing t[...], cat stack split chunk
    nn.py        softmax log_softmax layer_norm dropout, gather masked_fill where
    shapes.py    the dim, shape and dtype checks they share

Each family is a mixin class that Tensor (tinygrad_lite/tensor.py) inherits, so `t.exp()` is an
ordinary method call. Each op runs through Tensor's `_apply` as `<name>_op(arrays..., args)`, which
returns its output and its backward; the few that need the
class itself reach it as `tensor.Tensor`, since tensor.py imports these files to build it."""
