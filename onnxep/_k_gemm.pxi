# SGEMM (packed B panels) and its packing functions.
