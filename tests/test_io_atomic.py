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
