# Content hashing for the pre-packed weight cache.
