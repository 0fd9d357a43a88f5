"""`attribution cache`: prompt-cache reuse measured from every source that reports it, the reuse an LRU cache
could get from block hashes (the prefix-reuse curve, global against per-deployment caches), and what it is worth.
"""
