"""ai.onnx signal ops (onnx/defs/math windows and DFT): DFT, STFT, Hann/Hamming/BlackmanWindow, MelWeightMatrix."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ("dft", "stft", "hann_window", "hamming_window", "blackman_window", "mel_weight_matrix")
