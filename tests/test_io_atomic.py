"""Atomic writes keep an existing file's mode; a new file gets the umask's mode, not 0600."""

from __future__ import annotations

import os
import stat

import pytest

from fleetplan._io import atomic_write_text, write_bytes_atomic

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_a_new_file_gets_0666_less_the_umask(tmp_path, umask_027) -> None:
    target = tmp_path / "new" / "f.json"
    atomic_write_text(target, "{}\n")
    assert target.read_text() == "{}\n"
    assert _mode(target) == 0o640


def test_an_existing_file_keeps_its_mode(tmp_path, umask_027) -> None:
    target = tmp_path / "f.csv"
    target.write_text("old\n")
    os.chmod(target, 0o604)
    write_bytes_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert _mode(target) == 0o604
    assert [p.name for p in tmp_path.iterdir()] == ["f.csv"]  # no temporary file left


def test_plots_store_and_cache_get_the_same_modes(tmp_path, umask_027) -> None:
    from fleetplan.optimize.cache import DiskCache
    from fleetplan.profiles.store import load_profiles
    from fleetplan.viz.style import offscreen_axes, save_figure

    st = load_profiles()
    st.save(tmp_path / "profiles.csv")
    DiskCache(tmp_path / "cache").put("point", {"a": 1}, {"x": 1})
    (entry,) = (tmp_path / "cache").rglob("*.json")
    ax = offscreen_axes()
    ax.plot([0, 1], [1, 0])
    save_figure(ax, tmp_path / "plot.svg")
    for p in (tmp_path / "profiles.csv", entry, tmp_path / "plot.svg"):
        assert _mode(p) == 0o640, p
    os.chmod(tmp_path / "plot.svg", 0o644)
    save_figure(ax, tmp_path / "plot.svg")  # redrawn over a file the user made readable
    assert _mode(tmp_path / "plot.svg") == 0o644


# --- issue 16: files handled like a database would ---------------------------------------


def test_a_symlink_stays_a_link_and_its_target_is_replaced(tmp_path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "store.csv"
    real.write_text("old\n")
    os.chmod(real, 0o640)
    link = tmp_path / "store.csv"
    link.symlink_to(os.path.relpath(real, tmp_path))
    write_bytes_atomic(link, b"new\n")
    assert link.is_symlink() and real.read_bytes() == b"new\n"
    assert _mode(real) == 0o640
    assert sorted(p.name for p in real_dir.iterdir()) == ["store.csv"]  # written beside it


def test_stale_temporary_files_of_a_killed_writer_are_swept_on_the_next_write(tmp_path) -> None:
    target = tmp_path / "store.csv"
    target.write_text("old\n")
    stale = tmp_path / ".store.csv.abc123.tmp"  # what a kill -9 mid-write leaves
    stale.write_bytes(b"x" * 1000)
    other = tmp_path / ".other.csv.abc123.tmp"  # another file's: not ours to remove
    other.write_bytes(b"y")
    write_bytes_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.csv.abc123.tmp", "store.csv"]


def test_a_live_writers_temporary_file_is_not_swept(tmp_path) -> None:
    fcntl = pytest.importorskip("fcntl")
    target = tmp_path / "store.csv"
    live = tmp_path / ".store.csv.live.tmp"
    live.write_bytes(b"half")
    with open(live, "rb") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a writer holds it
        write_bytes_atomic(target, b"new\n")
        assert live.exists()


@pytest.mark.parametrize("exc", [KeyboardInterrupt, OSError("disk full")])
def test_the_temporary_file_is_removed_on_any_exception(tmp_path, monkeypatch, exc) -> None:
    target = tmp_path / "store.csv"
    target.write_text("old\n")

    def boom(*a, **k):
        raise exc

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(KeyboardInterrupt if exc is KeyboardInterrupt else OSError):
        write_bytes_atomic(target, b"new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["store.csv"]


def test_a_read_only_folder_or_a_directory_target_is_one_error_line(tmp_path,
                                                                  monkeypatch) -> None:
    import tempfile

    from fleetplan.errors import FleetplanError

    folder = tmp_path / "ro"
    folder.mkdir()
    with pytest.raises(FleetplanError, match="a directory"):
        write_bytes_atomic(folder, b"x")

    def denied(*a, **k):  # what a read-only folder answers (root ignores chmod, so simulated)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(FleetplanError) as err:
        write_bytes_atomic(folder / "store.csv", b"x")
    msg = str(err.value)
    assert str(folder / "store.csv") in msg and "Permission denied" in msg and "\n" not in msg
