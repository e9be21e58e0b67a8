"""The calls vactl uses: stats, stats_detail, arenas, clients, purge, reload, check, walk."""

import os

import vad
from conftest import DEFAULT_ARENA, run_as_nobody, session_of


def test_stats(client):
    before = client.stats()
    r = client.alloc(1 << 20)
    s = client.stats()
    assert set(s) == {"arena_bytes", "busy_bytes", "free_bytes", "lazy_bytes", "pooled_bytes",
                      "largest_free", "allocs", "frees", "fails", "clients", "held_bytes",
                      "held_ranges"}
    assert s["held_bytes"] == 1 << 20 and s["held_ranges"] == 1
    assert s["allocs"] >= before["allocs"] + 1 and s["clients"] >= 1
    assert s["arena_bytes"] >= DEFAULT_ARENA
    r.free()


def test_stats_detail(client):
    d = client.stats_detail()
    assert {"clients", "uptime_ms", "requests", "shares", "held_bytes", "held_ranges",
            "arenas"} <= set(d)
    names = [a["name"] for a in d["arenas"]]
    assert "default" in names and "small" in names
    one = client.stats_detail("small")
    assert [a["name"] for a in one["arenas"]] == ["small"]
    a = one["arenas"][0]
    assert a["size"] == 1 << 20 and a["quantum"] == 4096
    assert {"resident_bytes", "free_released_bytes", "pool_hits", "drains"} <= set(a)


def test_arenas(client):
    arenas = {a["name"]: a for a in client.arenas()}
    assert arenas["default"]["size"] == DEFAULT_ARENA
    assert arenas["default"]["backing"] == "memfd" and arenas["default"]["allowed"] is True
    assert arenas["locked"]["unsealed"] is False
    assert arenas["default"]["tenancy"] == "" and arenas["own"]["tenancy"] == "uid"


def test_tenant_arena(client):
    """A section with tenancy = uid: this uid's own arena, named NAME@UID in the listing."""
    mine = f"own@{os.getuid()}"
    r = client.alloc(4096, arena="own")
    assert r.arena == "own"
    arenas = {a["name"]: a for a in client.arenas()}
    assert arenas[mine]["tenancy"] == "uid" and arenas[mine]["size"] == 1 << 20
    assert arenas["own"]["tenants"] >= 1
    assert [a["name"] for a in client.stats_detail(mine)["arenas"]] == [mine]
    r.free()


def test_clients(client, observer):
    r = client.alloc(8192)
    s = session_of(observer, client)
    assert s["name"] == "pytest" and s["held_bytes"] == 8192 and s["held_ranges"] == 1
    assert s["allocs"] >= 1 and s["connected_ms"] > 0 and s["uid"] >= 0
    r.free()


def test_purge_reload_check_walk(client):
    r = client.alloc(4096)
    r.free()
    assert isinstance(client.purge(), int)
    assert isinstance(client.purge("default"), int)
    assert "reloaded" in client.reload()
    ok, report = client.check()
    assert ok is True and "consistent" in report
    keep = client.alloc(4096)
    m = client.walk()
    assert m["arena"] == "default" and m["size"] == DEFAULT_ARENA and m["quantum"] == 4096
    kinds = {b["kind"] for b in m["blocks"]}
    assert "busy" in kinds and kinds <= {"busy", "free", "lazy", "pooled"}
    mine = [b for b in m["blocks"] if b["offset"] == keep.offset and b["kind"] == "busy"]
    assert len(mine) == 1 and mine[0]["owner"] == "pytest" and mine[0]["holders"] == 1
    assert all("owner" not in b for b in m["blocks"] if b["kind"] != "busy")
    assert sum(b["size"] for b in m["blocks"]) == DEFAULT_ARENA
    short = client.walk("default", max_blocks=1)
    assert len(short["blocks"]) == 1
    keep.free()


def test_admin_calls_for_a_non_admin(daemon, tmp_path):
    out = run_as_nobody(daemon, tmp_path, """
        assert c.session["admin"] is False
        assert {a["name"]: a["allowed"] for a in c.arenas()}["locked"] is False
        for call in (c.clients, c.purge, c.reload, c.check, c.walk):
            try:
                call()
            except vad.PermissionDenied as e:
                assert e.code == vad.EPERM
            else:
                raise SystemExit(call.__name__ + " allowed")
        print("denied")
    """)
    assert out == "denied"
