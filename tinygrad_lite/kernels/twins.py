"""Which Numba kernel is the twin of which op: the table tinygrad_lite.dispatch reads to run an op's twin
under the numba backend. Module paths are strings, so reading the table imports no kernel."""

TWINS = {  # op (as its op file's @has_twin names it) -> "module:function" of its Numba twin in this package
    "softmax_forward": "softmax:softmax_forward_numba",
    "softmax_backward": "softmax:softmax_backward_numba",
    "log_softmax_forward": "softmax:log_softmax_forward_numba",
    "log_softmax_backward": "softmax:log_softmax_backward_numba",
    "layernorm_forward": "layernorm:layernorm_forward_numba",
    "layernorm_backward": "layernorm:layernorm_backward_numba",
    "gelu_forward": "gelu:gelu_forward_numba",
    "gelu_and_slope": "gelu:gelu_and_slope_numba",
    "cross_entropy_backward": "cross_entropy:cross_entropy_backward_numba",
    "adam_update": "adam:adam_update_numba",
    "keep_mask_from_seed": "dropout:keep_mask_from_seed_numba",
    "keep_rows_from_seed": "dropout:keep_rows_from_seed_numba",
    "embedding_backward": "embedding:embedding_backward_numba",
    "linear_product": "panels:linear_product_numba",
    "linear": "linear_layer:linear_op_numba",
}
