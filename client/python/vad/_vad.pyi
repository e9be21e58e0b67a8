"""Type stub of vad._vad, the C extension behind the vad package."""

from types import TracebackType
from typing import Any, Iterable, Optional, Sequence, Tuple, Type, TypedDict, Union
import os

VERSION: str
TOKEN_LEN: int
MAX_ALIGN: int
OK: int
EINVAL: int
ENOMEM: int
ECONNECT: int
EGONE: int
EPROTO: int
EVERSION: int
ENOSPC: int
EQUOTA: int
EPERM: int
ENOARENA: int
ENOTHELD: int
ETOKEN: int
ESIZE: int
EALIGN: int
ETOOBIG: int
EBUSY: int
EINTERNAL: int
EMAP: int
EUNSUPPORTED: int
ENOHELLO: int
EREVOKED: int
EEXPIRED: int
ETOKENUSED: int
EREADONLY: int
ECOMMIT: int
ETIMEDOUT: int
EKILLED: int
ERESUME: int
EINTERRUPTED: int

class Error(Exception):
    """A libvad call failed; .code is the VAD_E* code, str(e) the daemon's sentence."""

    code: Optional[int]

class QuotaExceeded(Error):
    """A per-client or per-uid quota would be exceeded (EQUOTA)."""

class NoSpace(Error):
    """The arena has no free range that large (ENOSPC)."""

class TokenInvalid(Error):
    """Unknown or malformed share token (ETOKEN), or one revoked, expired or used up
    (.code EREVOKED, EEXPIRED, ETOKENUSED)."""

class PermissionDenied(Error):
    """Arena allow-list or admin operation (EPERM)."""

class DaemonGone(Error):
    """The daemon went away (EGONE), none listens (ECONNECT), or after fork."""

class Stats(TypedDict):
    arena_bytes: int
    busy_bytes: int
    free_bytes: int
    lazy_bytes: int
    pooled_bytes: int
    largest_free: int
    allocs: int
    frees: int
    fails: int
    clients: int
    held_bytes: int
    held_ranges: int

class Session(TypedDict):
    session_id: int
    protocol_version: int
    admin: bool
    server: str
    default_arena: str
    socket_path: str

class ArenaInfo(TypedDict):
    name: str
    size: int
    quantum: int
    backing: str
    allowed: bool
    unsealed: bool
    tenancy: str
    tenants: int

class ClientInfo(TypedDict):
    session_id: int
    pid: int
    uid: int
    gid: int
    name: str
    held_bytes: int
    held_ranges: int
    allocs: int
    frees: int
    connected_ms: int

class Block(TypedDict):
    offset: int
    size: int
    kind: str
    node: int

class ArenaMap(TypedDict):
    arena: str
    size: int
    quantum: int
    truncated: bool
    blocks: list[Block]

class Range:
    """One reference to a shared range; a buffer (memoryview, numpy), read-only in an arena
    this client only reads (reader_uids/reader_gids)."""

    @property
    def size(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def arena(self) -> Optional[str]: ...
    @property
    def freed(self) -> bool: ...
    @property
    def refs(self) -> int: ...
    @property
    def client(self) -> Client: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int) -> memoryview: ...
    def free(self) -> None: ...
    def share(self, *, single_use: bool = False, ttl: Optional[float] = None) -> str: ...
    def unshare(self) -> None: ...
    def ndarray(self, shape: Union[None, int, Sequence[int]] = None, dtype: Any = "uint8") -> Any: ...
    def __enter__(self) -> Range: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None: ...

class Client:
    """A connection to the vad daemon; a context manager."""

    def __init__(
        self, socket: Union[None, str, bytes, os.PathLike[str]] = None, name: Optional[str] = None
    ) -> None: ...
    @property
    def session(self) -> Session: ...
    @property
    def closed(self) -> bool: ...
    @property
    def calls_in_flight(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> Client: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None: ...
    def alloc(
        self,
        size: int,
        align: int = 0,
        arena: Optional[str] = None,
        populate: bool = False,
        timeout: Optional[float] = None,
    ) -> Range: ...
    def alloc_batch(
        self,
        sizes: Iterable[int],
        align: int = 0,
        arena: Optional[str] = None,
        populate: bool = False,
        timeout: Optional[float] = None,
    ) -> list[Range]: ...
    def free_batch(self, ranges: Sequence[Range]) -> None: ...
    def attach(self, token: str) -> Range: ...
    def unshare(self, range: Range) -> None: ...
    def ndarray(
        self, shape: Union[int, Sequence[int]], dtype: Any = "float64", arena: Optional[str] = None
    ) -> Any: ...
    def attach_ndarray(
        self, token: str, shape: Union[int, Sequence[int]], dtype: Any = "float64"
    ) -> Any: ...
    def stats(self) -> Stats: ...
    def stats_detail(self, arena: Optional[str] = None) -> dict[str, Any]: ...
    def arenas(self) -> list[ArenaInfo]: ...
    def clients(self) -> list[ClientInfo]: ...
    def purge(self, arena: Optional[str] = None) -> int: ...
    def reload(self) -> str: ...
    def check(self) -> Tuple[bool, str]: ...
    def walk(self, arena: Optional[str] = None, max_blocks: int = 0) -> ArenaMap: ...

def strerror(code: int, /) -> str: ...
def range_of(obj: Any, /) -> Range: ...
