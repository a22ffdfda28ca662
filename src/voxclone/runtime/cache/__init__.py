"""Audio cache: memory, disk and Redis tiers behind one ``TieredCache``.

Every entry is the encoded audio bytes plus a little metadata (content type and
the voice it was made with). The voice is recorded so that deleting a voice can
remove every cached clip made with it, in every tier: a voice is biometric data
and its derived artifacts must not outlive it.

One module per job: ``keys`` (what an entry is keyed by), ``entries`` (what a
tier stores and counts), ``memory``, ``disk`` and ``redis_tier`` (the tiers),
``tiered`` (the lookup order, promotion and voice purges across tiers) and
``embeddings`` (speaker embeddings, not audio). This package exports what the
layers above use.
"""

from voxclone.runtime.cache.disk import CorruptEntry, DiskTier
from voxclone.runtime.cache.embeddings import EmbeddingCache
from voxclone.runtime.cache.entries import (
    DEFAULT_CONTENT_TYPE,
    CacheEntry,
    CacheListener,
    CacheTier,
    TierCounters,
)
from voxclone.runtime.cache.keys import cache_key, voice_tag
from voxclone.runtime.cache.memory import MemoryTier
from voxclone.runtime.cache.redis_tier import RedisTier
from voxclone.runtime.cache.tiered import TieredCache

__all__ = [
    "DEFAULT_CONTENT_TYPE",
    "CacheEntry",
    "CacheListener",
    "CacheTier",
    "CorruptEntry",
    "DiskTier",
    "EmbeddingCache",
    "MemoryTier",
    "RedisTier",
    "TierCounters",
    "TieredCache",
    "cache_key",
    "voice_tag",
]
