"""Compiled-kernel cache, backend-neutral: memory first, then disk, then compile.

The key is a sha256 over (specux version, dialect, *caller parts): callers pass the compiler
version, the options, the target architecture and the full source, so a change to any of them
is a new entry (CuPy's and Triton's scheme). Disk entries live at
``<cache_dir()>/<dialect>/<key[:2]>/<key>.bin``, each a header (magic + sha256 of the payload)
and the payload; a file that fails the check is deleted and recompiled. Writes go to a temp file
in the same folder and are ``os.replace``d in, so a reader never sees half a file and two
processes writing the same key both leave a whole one.

Environment: ``SPECUX_CACHE_DIR`` moves the cache, ``SPECUX_DISK_CACHE=0`` keeps it in memory.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
import warnings
import weakref
from collections.abc import Callable

from specux import options as _options
from specux._version import __version__

MAGIC = b"SPECUXK1"  # format version 1: MAGIC, sha256(payload) (32 bytes), payload
_HEADER = len(MAGIC) + 32
_ENTRY = re.compile(r"^[0-9a-f]{64}\.bin$|^[0-9a-f]{64}\..*\.tmp$")
_SHARD = re.compile(r"^[0-9a-f]{2}$")  # an entry's folder: its key's first two hex digits

# One warning per process for an unusable cache folder, however many caches or kernels.
_warned = False
_warn_lock = threading.Lock()
_instances: weakref.WeakSet[KernelCache] = weakref.WeakSet()


def _warn_once(message: str) -> None:
    global _warned
    with _warn_lock:
        if _warned:
            return
        _warned = True
    warnings.warn(message, RuntimeWarning, stacklevel=5)


def cache_key(dialect: str, key_parts: tuple[str, ...]) -> str:
    """Hex sha256 over (specux version, dialect, *key_parts), each part length-prefixed."""
    digest = hashlib.sha256()
    for part in (__version__, dialect, *key_parts):
        data = part.encode() if isinstance(part, str) else bytes(part)
        # The length prefix keeps ("ab", "c") and ("a", "bc") apart.
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


class KernelCache:
    """Compiled binaries for one dialect ("cuda", "metal", ...), keyed by source and settings.

    Thread-safe: concurrent requests for one key compile once (a lock per key); different keys
    compile in parallel. Counters for tests: ``hits`` (found in memory), ``misses`` (not in
    memory), ``disk_hits`` (misses found on disk), ``compiles`` (misses compiled).
    """

    def __init__(self, dialect: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", dialect):
            raise ValueError(f"dialect must be a plain folder name, got {dialect!r}")
        self.dialect = dialect
        self._memory: dict[str, bytes] = {}
        self._key_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.disk_hits = 0
        self.misses = 0
        self.compiles = 0
        _instances.add(self)

    def key(self, key_parts: tuple[str, ...]) -> str:
        """The hex key for ``key_parts`` (the name of the disk entry)."""
        return cache_key(self.dialect, key_parts)

    def folder(self) -> str:
        """``<cache_dir()>/<dialect>``, read now: the environment may change between calls."""
        return os.path.join(_options.cache_dir(), self.dialect)

    def get_or_compile(self, key_parts: tuple[str, ...], compile_fn: Callable[[], bytes]) -> bytes:
        """The binary for ``key_parts``: from memory, else from disk, else ``compile_fn()``.

        ``key_parts`` must name everything the binary depends on besides the specux version and
        the dialect (added here): compiler version, options, architecture, full source.
        Errors from ``compile_fn`` propagate and nothing is cached.
        """
        key = self.key(key_parts)
        binary = self._memory.get(key)
        if binary is not None:
            self.hits += 1
            return binary
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        try:
            with key_lock:
                return self._fill(key, compile_fn)
        finally:
            with self._lock:
                if self._key_locks.get(key) is key_lock:
                    del self._key_locks[key]

    def _fill(self, key: str, compile_fn: Callable[[], bytes]) -> bytes:
        """Under the key's lock: memory again, then disk, then compile and store."""
        binary = self._memory.get(key)
        if binary is not None:  # another thread finished it while we waited
            self.hits += 1
            return binary
        disk = _options.disk_cache_enabled()
        binary = self._load(key) if disk else None
        with self._lock:
            self.misses += 1
            self.disk_hits += binary is not None
        if binary is None:
            binary = bytes(compile_fn())
            with self._lock:
                self.compiles += 1
            if disk:
                self._store(key, binary)
        self._memory[key] = binary
        return binary

    def _path(self, key: str) -> str:
        return os.path.join(self.folder(), key[:2], f"{key}.bin")

    def _load(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except (FileNotFoundError, NotADirectoryError):  # a miss; an unusable folder warns on write
            return None
        except OSError as exc:
            _warn_once(f"specux kernel cache {path!r} cannot be read ({exc}); compiling in memory")
            return None
        magic, digest, payload = data[: len(MAGIC)], data[len(MAGIC) : _HEADER], data[_HEADER:]
        if magic == MAGIC and hashlib.sha256(payload).digest() == digest:
            return payload
        # Truncated (a crash mid-write on a filesystem without atomic rename), corrupt, or an
        # older format: drop it and compile again.
        try:
            os.remove(path)
        except OSError:
            pass
        return None

    def _store(self, key: str, binary: bytes) -> None:
        path = self._path(key)
        folder = os.path.dirname(path)
        temp = None
        try:
            os.makedirs(folder, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=folder, prefix=f"{key}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(MAGIC + hashlib.sha256(binary).digest() + binary)
            os.replace(temp, path)
        except OSError as exc:
            if temp is not None:
                try:
                    os.remove(temp)
                except OSError:
                    pass
            _warn_once(
                f"specux kernel cache {folder!r} is not writable ({exc}); kernels are cached in "
                "memory only (set SPECUX_CACHE_DIR to a writable folder, or SPECUX_DISK_CACHE=0)"
            )

    def clear(self) -> None:
        """Forget every entry: the in-memory ones, and this dialect's files on disk."""
        with self._lock:
            self._memory.clear()
        clear_disk(self.dialect)


def clear_disk(dialect: str) -> None:
    """Delete ``<cache_dir()>/<dialect>``'s cache entries (only files named as entries), and
    the folders that held them once empty."""
    root = os.path.join(_options.cache_dir(), dialect)
    if not os.path.isdir(root):
        return
    # Remove only what we wrote, in case SPECUX_CACHE_DIR points at a shared folder: entry
    # files in two-hex-digit shard folders, and a folder only where an entry was in it (an
    # empty folder of the user's, whatever its name, stays).
    emptied = False
    for sub in listing(root):
        folder = os.path.join(root, sub)
        if not _SHARD.match(sub) or not os.path.isdir(folder):
            continue
        entries = [name for name in listing(folder) if _ENTRY.match(name)]
        for name in entries:
            try:
                os.remove(os.path.join(folder, name))
            except OSError:
                pass
        if entries:
            emptied = True
            try:
                os.rmdir(folder)
            except OSError:
                pass
    if emptied:
        try:
            os.rmdir(root)
        except OSError:
            pass


def clear_all() -> None:
    """Clear every cache: live KernelCaches' memory, and every dialect's entries on disk (also
    those of dialects this process never used); for ``specux.clear_cache()``."""
    for cache in list(_instances):
        with cache._lock:
            cache._memory.clear()
    root = _options.cache_dir()
    if os.path.isdir(root):
        for dialect in listing(root):
            if os.path.isdir(os.path.join(root, dialect)):
                clear_disk(dialect)


def listing(folder: str) -> list[str]:
    """``folder``'s names, or none (with one warning) where it cannot be read: clearing a
    cache the user cannot read leaves it as it is instead of raising."""
    try:
        return os.listdir(folder)
    except OSError as exc:
        _warn_once(f"specux could not read the cache folder {folder!r} ({exc}); its entries "
                   "were left as they are")  # fmt: skip
        return []


__all__ = ["MAGIC", "KernelCache", "cache_key", "clear_all", "clear_disk", "listing"]
