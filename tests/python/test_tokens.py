"""Share tokens that die before their range: Client.unshare, single-use and expiring
tokens (Range.share(single_use=..., ttl=...)), each refused with its own code."""

import pytest

import vad
from conftest import timeout, wait_until


def refused(client, token):
    """The code the attach of token is refused with (TokenInvalid)."""
    with pytest.raises(vad.TokenInvalid) as e:
        client.attach(token)
    assert str(e.value)
    return e.value.code


def test_unshare_revokes_and_holders_keep(client, daemon):
    r = client.alloc(4096)
    memoryview(r)[:5] = b"share"
    token = r.share()
    with vad.Client(daemon.socket) as holder, vad.Client(daemon.socket) as late:
        a = holder.attach(token)
        client.unshare(r)
        assert refused(late, token) == vad.EREVOKED
        client.unshare(r)  # no token left: nothing to do
        assert bytes(memoryview(a)[:5]) == b"share"  # the holder keeps its reference
        again = r.share()
        assert again != token
        r.unshare()
        assert refused(late, again) == vad.EREVOKED
        with pytest.raises(TypeError):
            late.unshare(a)  # another client's Range
        a.free()
    r.free()


def test_single_use(client, daemon):
    r = client.alloc(4096)
    older = r.share(single_use=True)
    token = r.share(single_use=True)
    with vad.Client(daemon.socket) as other:
        assert refused(other, older) == vad.EREVOKED  # replaced by the newer one
        a = other.attach(token)
        assert refused(other, token) == vad.ETOKENUSED
        assert refused(client, token) == vad.ETOKENUSED
        plain = r.share()
        assert plain not in (older, token)
        other.attach(plain).free()
        other.attach(plain).free()
        a.free()
    r.free()


def test_expiring(client, daemon):
    r = client.alloc(4096)
    with pytest.raises(ValueError):
        r.share(ttl=0)
    with pytest.raises(ValueError):
        r.share(ttl=-1.0)
    token = r.share(ttl=0.05)
    with vad.Client(daemon.socket) as other:

        def expired():
            try:
                other.attach(token).free()
                return False
            except vad.TokenInvalid as e:
                assert e.code == vad.EEXPIRED, e
                return True

        assert wait_until(expired, seconds=10.0)
        assert refused(other, token) == vad.EEXPIRED
        lasting = r.share(ttl=timeout(3600))
        other.attach(lasting).free()
    r.free()


def test_codes_exported():
    assert (vad.EREVOKED, vad.EEXPIRED, vad.ETOKENUSED) == (-21, -22, -23)
    assert vad.strerror(vad.ETOKENUSED) == "the single-use share token was already used"
