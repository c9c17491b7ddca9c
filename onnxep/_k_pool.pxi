# Pooling: MaxPool, AveragePool, GlobalAveragePool/GlobalMaxPool.
