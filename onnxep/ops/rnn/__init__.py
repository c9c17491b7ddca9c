"""ai.onnx recurrent ops (onnx/defs/rnn): RNN, GRU, LSTM."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ("rnn", "gru", "lstm")
