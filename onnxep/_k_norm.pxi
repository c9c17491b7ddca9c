# Normalization and reductions: BatchNormalization (inference), LRN, Softmax.
