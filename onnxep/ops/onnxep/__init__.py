"""com.onnxep internal ops: the channel-last and fused ops that onnxep's graph passes write."""
