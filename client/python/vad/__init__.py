"""vad: Python binding of libvad, the client of the vad shared-memory range daemon.

vad owns large shared-memory arenas and hands out ranges of them to client
processes over a Unix socket. This package wraps libvad (a C extension over
its C API, not ctypes)::

    import vad, numpy

    with vad.Client() as client:              # $VAD_SOCKET or the default socket
        r = client.alloc(1 << 20)             # 1 MiB, zero-filled, shared
        a = numpy.frombuffer(r, numpy.uint8)  # no copy: the shared memory itself
        a[:5] = b"hello"
        token = r.share()                     # another process: client.attach(token)
        del a                                 # free() refuses while a buffer is exported
        r.free()

    frame = client.ndarray((1080, 1920), "uint8")   # an array over a fresh range
    vad.range_of(frame).share()

Failures raise vad.Error (.code is the VAD_E* code, str(e) the daemon's
sentence) or one of its subclasses: QuotaExceeded, NoSpace, TokenInvalid,
PermissionDenied, DaemonGone. The GIL is released while waiting on the daemon,
so threads sharing one Client pipeline their requests. After fork a child must
create its own Client. See docs/PYTHON.md.
"""

from ._vad import (  # noqa: F401  (re-exported)
    EALIGN,
    EBUSY,
    ECOMMIT,
    ECONNECT,
    EEXPIRED,
    EGONE,
    EINTERNAL,
    EINTERRUPTED,
    EINVAL,
    EKILLED,
    EMAP,
    ENOARENA,
    ENOHELLO,
    ENOMEM,
    ENOSPC,
    ENOTHELD,
    EPERM,
    EPROTO,
    EQUOTA,
    EREADONLY,
    ERESUME,
    EREVOKED,
    ESIZE,
    ETIMEDOUT,
    ETOKEN,
    ETOKENUSED,
    ETOOBIG,
    EUNSUPPORTED,
    EVERSION,
    MAX_ALIGN,
    OK,
    TOKEN_LEN,
    VERSION,
    Client,
    DaemonGone,
    Error,
    NoSpace,
    PermissionDenied,
    QuotaExceeded,
    Range,
    TokenInvalid,
    range_of,
    strerror,
)

__version__ = VERSION

__all__ = [
    "Client",
    "Range",
    "Error",
    "QuotaExceeded",
    "NoSpace",
    "TokenInvalid",
    "PermissionDenied",
    "DaemonGone",
    "range_of",
    "strerror",
    "VERSION",
    "TOKEN_LEN",
    "MAX_ALIGN",
    "OK",
    "EINVAL",
    "ENOMEM",
    "ECONNECT",
    "EGONE",
    "EPROTO",
    "EVERSION",
    "ENOSPC",
    "EQUOTA",
    "EPERM",
    "ENOARENA",
    "ENOTHELD",
    "ETOKEN",
    "ESIZE",
    "EALIGN",
    "ETOOBIG",
    "EBUSY",
    "EINTERNAL",
    "EMAP",
    "EUNSUPPORTED",
    "ENOHELLO",
    "EREVOKED",
    "EEXPIRED",
    "ETOKENUSED",
    "EREADONLY",
    "ECOMMIT",
    "ETIMEDOUT",
    "EKILLED",
    "ERESUME",
    "EINTERRUPTED",
]
