"""`make release` (.ci/release_check.py): the checkout names one release everywhere, and the check catches a
place that names another."""

import importlib.util
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("release_check", ROOT / ".ci" / "release_check.py")
release_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(release_check)


def copy_of_checkout(tmp_path):
    for name in ("pyproject.toml", "_config.yml", "CITATION.cff", "CHANGELOG.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / "intro.md", tmp_path / "book" / "intro.md")
    (tmp_path / "notebooks").mkdir()
    first = sorted((ROOT / "notebooks").glob("*.ipynb"))[0]
    shutil.copy(first, tmp_path / "notebooks" / first.name)
    return tmp_path


def test_this_checkout_names_one_release():
    tag, found = release_check.problems(ROOT)
    assert found == [], found
    assert release_check.main(ROOT) == 0 and tag.startswith("v")


def test_each_place_that_disagrees_is_named(tmp_path, capsys):
    root = copy_of_checkout(tmp_path)
    pyproject = (root / "pyproject.toml").read_text()
    version = release_check.problems(ROOT)[0].removeprefix("v")
    (root / "pyproject.toml").write_text(pyproject.replace(f'version = "{version}"', 'version = "9.9.9"'))
    tag, found = release_check.problems(root)
    assert tag == "v9.9.9"
    named = " ".join(found)
    for place in ("_config.yml", "notebooks/", "CITATION.cff", "book/intro.md", "CHANGELOG.md"):
        assert place in named, (place, found)
    assert release_check.main(root) == 1
    assert "disagreement" in capsys.readouterr().out
