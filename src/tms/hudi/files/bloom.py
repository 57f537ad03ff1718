"""Hudi's bloom filter of a base file's record keys, as its writers put it in every Parquet
base file of a table with meta fields: what its bloom index reads to find the files a key may
be in. A writer using that index fails on a base file without one (`HoodieKeyLookupHandle`),
so the files tms writes carry it too.

The filter is `HoodieDynamicBoundedBloomFilter` (type code `DYNAMIC_V0`) with Hudi's default
sizes (`hoodie.index.bloom.num_entries` 60,000, `hoodie.index.bloom.fpp` 1e-9,
`hoodie.bloom.index.filter.dynamic.max.entries` 100,000): rows of Hadoop's `BloomFilter`,
a new row every 60,000 keys until the bound, then the rows in turn
(`InternalDynamicBloomFilter.getActiveStandardBF`). A key's bits are Hadoop's
`HashFunction` over its UTF-8 bytes: MurmurHash 2 (Hadoop's, whose tail bytes are signed),
each hash seeded with the one before, `abs(hash % bits)`. Serialized with Hadoop's
`Writable` layout and Base64 in the footer key `org.apache.hudi.bloomfilter`, its type code in
`hoodie_bloom_filter_type_code`.

Keys are hashed a chunk at a time, keys of one length together, in numpy: the filter's
memory is its rows (about 324 KB each), whatever the number of keys.
"""

from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "BLOOM_FILTER_KEY",
    "BLOOM_TYPE_KEY",
    "DYNAMIC_V0",
    "DynamicBloomFilter",
    "FooterBloomFilter",
    "footer_bloom_filter",
]

BLOOM_FILTER_KEY = b"org.apache.hudi.bloomfilter"
BLOOM_TYPE_KEY = b"hoodie_bloom_filter_type_code"
DYNAMIC_V0 = "DYNAMIC_V0"
NUM_ENTRIES = 60_000
FPP = 0.000000001
MAX_ENTRIES = 100_000
MURMUR_HASH = 1
"""`org.apache.hadoop.util.hash.Hash.MURMUR_HASH`."""
FILTER_VERSION = -1
"""`Filter.VERSION` of Hadoop's `Writable` layout."""
CHUNK_KEYS = 1 << 16

_M = np.uint32(0x5BD1E995)


class DynamicBloomFilter:
    """A `DYNAMIC_V0` bloom filter, keys added in order."""

    def __init__(
        self, num_entries: int = NUM_ENTRIES, fpp: float = FPP, max_entries: int = MAX_ENTRIES
    ) -> None:
        self.vector_size = math.ceil(num_entries * (-math.log(fpp) / (math.log(2) ** 2)))
        self.nb_hash = math.ceil(math.log(2) * self.vector_size / num_entries)
        self.row_keys = num_entries
        self.max_keys = max_entries
        self.rows = [np.zeros(self.vector_size, dtype=bool)]
        self.current = 0
        """Keys in the active row (`currentNbRecord`, which keeps counting once rows turn)."""
        self.turning = False
        """The bound is reached: keys go to the rows in turn (`reachedMax`)."""
        self.turn = 0

    def add(self, keys: pa.Array | pa.ChunkedArray) -> None:
        """Add record keys (strings, none null), in order."""
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        for start in range(0, len(keys), CHUNK_KEYS):
            chunk = keys.slice(start, CHUNK_KEYS)
            self._set(self._rows_of(len(chunk)), self._positions(chunk))

    def serialize(self) -> str:
        """`serializeToString`: the filter's `Writable` bytes in Base64."""
        out = [self._filter_header()]
        out.append(struct.pack(">iii", self.row_keys, self.current, len(self.rows)))
        for row in self.rows:
            out.append(self._filter_header())
            out.append(np.packbits(row, bitorder="little").tobytes())
        return base64.b64encode(b"".join(out)).decode("ascii")

    def footer(self) -> dict[bytes, bytes]:
        """The footer entries of a base file holding the keys added."""
        return {BLOOM_FILTER_KEY: self.serialize().encode(), BLOOM_TYPE_KEY: DYNAMIC_V0.encode()}

    def _filter_header(self) -> bytes:
        return struct.pack(">iibi", FILTER_VERSION, self.nb_hash, MURMUR_HASH, self.vector_size)

    def _rows_of(self, count: int) -> np.ndarray:
        """The row each of the next `count` keys goes to, the filter's state moved past them."""
        rows = np.empty(count, dtype=np.int64)
        done = 0
        while done < count:
            if self.turning:
                n = count - done
                rows[done:] = (self.turn + np.arange(n)) % len(self.rows)
                self.turn += n
                self.current += n
                break
            if self.current >= self.row_keys:
                if len(self.rows) * self.row_keys < self.max_keys:
                    self.rows.append(np.zeros(self.vector_size, dtype=bool))
                    self.current = 0
                else:
                    self.turning = True
                    rows[done] = 0  # the key that reaches the bound goes to the first row
                    self.current += 1
                    done += 1
                    continue
            n = min(count - done, self.row_keys - self.current)
            rows[done : done + n] = len(self.rows) - 1
            self.current += n
            done += n
        return rows

    def _positions(self, keys: pa.Array) -> np.ndarray:
        """The `nb_hash` bit positions of each key (one row per key)."""
        lengths = pc.binary_length(keys).to_numpy(zero_copy_only=False)
        positions = np.empty((len(keys), self.nb_hash), dtype=np.int32)
        for length in np.unique(lengths):
            if length == 0:
                raise ValueError("a record key is empty: Hudi's bloom filter takes no empty key")
            where = np.flatnonzero(lengths == length)
            positions[where] = self._hashed(_key_bytes(keys, where, int(length)))
        return positions

    def _hashed(self, data: np.ndarray) -> np.ndarray:
        """Hadoop's `HashFunction.hash` of keys of one length (`data`: a key per row): each
        hash is MurmurHash seeded with the one before; a key's mixed words are the same in
        every one of them, so they are mixed once."""
        out = np.empty((self.nb_hash, data.shape[0]), dtype=np.int32)
        words, tail = _mixed_words(data), _tail(data)
        seed = np.zeros(data.shape[0], dtype=np.uint32)
        for i in range(self.nb_hash):
            seed = _murmur(words, tail, data.shape[1], seed)
            np.abs(np.fmod(seed.view(np.int32), np.int32(self.vector_size)), out=out[i])
        return out.T

    def _set(self, rows: np.ndarray, positions: np.ndarray) -> None:
        for row in np.unique(rows):
            self.rows[int(row)][positions[rows == row].ravel()] = True


def _key_bytes(keys: pa.Array, where: np.ndarray, length: int) -> np.ndarray:
    """The UTF-8 bytes of the keys at `where`, all `length` long, a key per row."""
    chosen = pc.take(keys, pa.array(where)).cast(pa.binary())
    if isinstance(chosen, pa.ChunkedArray):
        chosen = chosen.combine_chunks()
    offsets = np.frombuffer(chosen.buffers()[1], dtype=np.int32)[chosen.offset :]
    start = int(offsets[0])
    data = np.frombuffer(
        chosen.buffers()[2], dtype=np.uint8, count=len(where) * length, offset=start
    )
    return data.reshape(len(where), length)


def _mixed_words(data: np.ndarray) -> np.ndarray:
    """The body of MurmurHash: each whole 4-byte word of each key (little-endian), mixed
    (`k *= m; k ^= k >>> 24; k *= m`), a word per row."""
    words = data.shape[1] >> 2
    with np.errstate(over="ignore"):
        k = np.ascontiguousarray(data[:, : words * 4]).view("<u4") * _M
        k ^= k >> np.uint32(24)
        k *= _M
    return np.ascontiguousarray(k.T)  # a word of every key per row: read a row at a time


def _tail(data: np.ndarray) -> np.ndarray:
    """The bytes after the last whole word, as Java's signed bytes widened to int."""
    return data[:, (data.shape[1] >> 2) * 4 :].view(np.int8).astype(np.int32)


def _murmur(words: np.ndarray, tail: np.ndarray, length: int, seed: np.ndarray) -> np.ndarray:
    """Hadoop's `MurmurHash.hash(data, length, seed)` of each key (uint32 math)."""
    with np.errstate(over="ignore"):
        h = seed ^ np.uint32(length)
        for word in words:
            h = (h * _M) ^ word
        left = tail.shape[1]
        if left:
            if left >= 3:
                h ^= (tail[:, left - 3] << 16).view(np.uint32)
            if left >= 2:
                h ^= (tail[:, left - 2] << 8).view(np.uint32)
            h ^= tail[:, left - 1].view(np.uint32)
            h = h * _M
        h ^= h >> np.uint32(13)
        h = h * _M
        h ^= h >> np.uint32(15)
    return h


@dataclass(frozen=True)
class FooterBloomFilter:
    """The bloom filter a base file's footer holds, as Hudi's readers take it."""

    type_code: str
    serialized: str
    """`serializeToString`: Base64 text, which the metadata table stores as its UTF-8 bytes."""


def footer_bloom_filter(footer: dict[bytes, bytes] | None) -> FooterBloomFilter | None:
    """The filter of a Parquet footer's key-value metadata; None when it has none (a table
    without meta fields gets none)."""
    serialized = (footer or {}).get(BLOOM_FILTER_KEY)
    if not serialized:
        return None
    type_code = (footer or {}).get(BLOOM_TYPE_KEY) or DYNAMIC_V0.encode()
    return FooterBloomFilter(type_code.decode(), serialized.decode())
