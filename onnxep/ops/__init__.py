"""The cpu backend's op kernels: one op per file in a family subpackage (math, tensor, nn, reduce, rnn, quant, control, sequence,
text, image, signal, ml, training, onnxep for com.onnxep),
each family listing its op modules in its OPS, read once by _registry; shared helpers are the _*.py modules here and
beside the ops that use them."""
