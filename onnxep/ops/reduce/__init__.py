"""ai.onnx reduction ops (onnx/defs/reduction): Reduce*, ArgMax, ArgMin, and TopK."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = (
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1", "reduce_l2",
    "reduce_log_sum", "reduce_log_sum_exp", "reduce_sum_square", "arg_max", "arg_min", "top_k",
)
