"""Cases of the ONNX backend suite that cannot pass, each with a one-line reason.

Keys are regular expressions searched in the test name (`test_<case>_cpu`). Only list a case that cannot pass for the
stated reason: every case here also fails with onnx.reference alone (the fallback) and no cpu kernel covers it.
A case that fails for a fixable reason in onnxep stays in the suite and counts as failed (e.g. until the cpu
backend owns BatchNormalization < 14 and Softmax < 13, see test_onnx_backend.py)."""

_REF = "onnx.reference (the fallback) fails it and onnxep has no cpu kernel for it: "

#: Excluded in every run.
EXCLUDE: dict[str, str] = {
    r"^test_bernoulli": "Bernoulli's output is random; the expected data is one numpy draw no runtime reproduces",
    r"^test_image_decoder_": _REF + "its ImageDecoder needs Pillow, which is not a test dependency",
    r"^test_if_opt_": _REF + "If with an optional(sequence) output comes back as 1 element instead of 5",
    r"^test_loop16_seq_none_": _REF + "Loop over an empty optional sequence returns an array, not a sequence",
    r"^test_range_.*_expanded_": _REF + "the Range function body's Loop stacks scan outputs with an extra axis",
    r"^test_scan_sum_": _REF + "Scan-8 (with the batch axis and sequence_lens) is not implemented there",
    r"^test_scatter_with(out)?_axis_": _REF + "Scatter (deprecated, opset 9-10) is not implemented there",
    r"^test_gradient_of_add": _REF + "ai.onnx.preview.training Gradient is not implemented there",
}

#: Expected to fail until a cpu kernel lands (other groups' ops); applied as strict expected failures, so the run stays
#: green now and a case that starts passing fails loudly ("unexpected success"): then delete its line here.
KNOWN_FAILING: dict[str, str] = {
}

#: Excluded only with --no-fallback (none: with the fallback off, a case whose node the cpu backend lacks is a plain
#: failure, which is the number that run measures).
NO_FALLBACK_EXCLUDE: dict[str, str] = {}
