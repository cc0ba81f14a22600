"""The filesystem view plan: nearest rule wins, links recreated, redundant rules dropped."""

from __future__ import annotations

import os
from pathlib import Path

from corrgrpo.sandbox.isolation import default_exposed_paths, plan_filesystem_view


def _tree(tmp_path: Path) -> Path:
    for name in ("usr/lib/py/site-packages/numpy", "usr/lib/py/site-packages/secret", "usr/bin"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "data").mkdir()
    os.symlink("usr/bin", tmp_path / "bin")
    return tmp_path


def test_nearest_rule_decides(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    usr, site = str(root / "usr"), str(root / "usr/lib/py/site-packages")
    numpy = site + "/numpy"
    steps, links = plan_filesystem_view([usr, numpy, usr + "/bin"], [site, str(root / "data")])
    # /usr/bin is already shown by /usr; data is hidden by not being exposed at all.
    assert steps == [("bind", usr), ("hide", site), ("bind", numpy)]
    assert links == {}


def test_symlinked_directory_is_recreated_and_its_target_exposed(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    steps, links = plan_filesystem_view([str(root / "bin")], [])
    assert steps == [("bind", str(root / "usr/bin"))]
    assert links == {str(root / "bin"): "usr/bin"}


def test_missing_paths_are_skipped(tmp_path: Path) -> None:
    steps, links = plan_filesystem_view([str(tmp_path / "absent")], [str(tmp_path / "gone")])
    assert (steps, links) == ([], {})


def test_an_explicit_exposure_beats_a_default_hide(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    site = str(root / "usr/lib/py/site-packages")
    steps, _ = plan_filesystem_view([str(root / "usr"), site], [site])
    assert steps == [("bind", str(root / "usr"))]


def test_default_exposure_never_includes_the_checkout() -> None:
    checkout = str(Path(__file__).resolve().parents[2])
    for path in default_exposed_paths():
        assert not checkout.startswith(path.rstrip("/") + "/"), path  # no ancestor of it
        if path.startswith(checkout + "/"):  # a virtual environment inside the checkout
            assert "/site-packages/" in path, path


def test_secret_files_are_hidden_inside_an_exposed_directory(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "shadow").write_text("root:x\n")
    (etc / "hosts").write_text("")
    steps, _ = plan_filesystem_view([str(etc)], [str(etc / "shadow")])
    assert steps == [("bind", str(etc)), ("hide", str(etc / "shadow"))]
