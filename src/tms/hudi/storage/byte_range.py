"""A seekable, read-only file over a function that reads bytes at an offset: a region of a
local file, or an object on storage read by ranged GETs."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

__all__ = ["RangeFile"]


class RangeFile(io.RawIOBase):
    """`size` bytes read through `read_at(offset, length)`, which may return fewer only at
    the end."""

    def __init__(self, read_at: Callable[[int, int], bytes], size: int) -> None:
        self._read_at = read_at
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        wanted = min(len(buffer), self._size - self._pos)
        if wanted <= 0:
            return 0
        data = self._read_at(self._pos, wanted)
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)
