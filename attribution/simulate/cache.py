"""The simulated prefix cache: which prompt blocks a newly admitted request finds already computed."""

from __future__ import annotations

from collections import OrderedDict


class PrefixCache:
    """LRU over cached blocks whose capacity is the free part of the KV pool (cached blocks are evictable).

    Synthetic requests have a session id: all their blocks lie on one token stream, so a session's cached
    blocks are always a prefix of it and one LRU entry (session -> blocks) stands for that prefix; eviction
    trims the least recently used entry from its tail, as vLLM frees tail blocks first. Replayed requests
    may carry block hashes instead; each hash is then its own entry of one block.
    """

    def __init__(self, block: int) -> None:
        self.block = block
        self.lru: OrderedDict[int, int] = OrderedDict()
        self.total = 0

    def hit_session(self, s: int, tokens: int) -> int:
        h = self.lru.get(s)
        if h is None:
            return 0
        self.lru.move_to_end(s)
        return min(h, tokens // self.block) * self.block

    def put_session(self, s: int, tokens: int, cap_blocks: int) -> None:
        nb = tokens // self.block
        old = self.lru.get(s, 0)
        if nb > old:
            self.lru[s] = nb
            self.total += nb - old
        if old:
            self.lru.move_to_end(s)
        self.evict(cap_blocks)

    def hit_hashes(self, hashes: list[int], tokens: int) -> int:
        n = 0
        for h in hashes[: tokens // self.block]:
            if h not in self.lru:
                break
            self.lru.move_to_end(h)
            n += 1
        return n * self.block

    def put_hashes(self, hashes: list[int], cap_blocks: int) -> None:
        for h in hashes:
            if h in self.lru:
                self.lru.move_to_end(h)
            else:
                self.lru[h] = 1
                self.total += 1
        self.evict(cap_blocks)

    def evict(self, cap_blocks: int) -> None:
        lru = self.lru
        while self.total > cap_blocks:
            key, w = next(iter(lru.items()))
            need = self.total - cap_blocks
            if w > need:
                lru[key] = w - need
                self.total -= need
            else:
                del lru[key]
                self.total -= w
