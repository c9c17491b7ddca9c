# Convolution (NCHW for now).
