"""`make release`: check that every place naming the release agrees, then print the tag to create.

The version lives in pyproject.toml (X.Y.Z). The release is the git tag vX.Y.Z, and these must name it:
`lmbook_release` in _config.yml, the install line in every notebook's first cell, CITATION.cff's `version`,
the BibTeX block of book/intro.md and the newest heading of CHANGELOG.md.
Usage: python .ci/release_check.py [ROOT]; exit status 1 on a mismatch.
"""

import json
import re
import sys
from pathlib import Path

import yaml


def problems(root: Path) -> tuple[str, list[str]]:
    """(the tag, every disagreement found) for the checkout at ``root``."""
    version = re.search(r'^version = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M).group(1)
    tag, found = f"v{version}", []
    config = yaml.safe_load((root / "_config.yml").read_text())
    if config.get("lmbook_release") != tag:
        found.append(f"_config.yml: lmbook_release is {config.get('lmbook_release')!r}, expected {tag!r}")
    pin = f"git+{config['repository']['url']}@{tag}"
    for nb in sorted((root / "notebooks").glob("*.ipynb")):
        first = next(c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        if pin not in "".join(first["source"]):
            found.append(f"{nb.relative_to(root)}: the first cell does not install {pin}")
    cited = re.search(r"^version:\s*\"?([^\"\s]+)\"?", (root / "CITATION.cff").read_text(), re.M)
    if not cited or cited.group(1) != version:
        found.append(f"CITATION.cff: version is {cited and cited.group(1)!r}, expected {version!r}")
    bibtex = re.search(r"version\s*=\s*\{([^}]+)\}", (root / "book" / "intro.md").read_text())
    if not bibtex or bibtex.group(1) != version:
        found.append(f"book/intro.md: the BibTeX version is {bibtex and bibtex.group(1)!r}, expected {version!r}")
    newest = re.search(r"^## (.+)$", (root / "CHANGELOG.md").read_text(), re.M)
    if not newest or not re.search(rf"\b{re.escape(version)}\b", newest.group(1)):
        found.append(f"CHANGELOG.md: the newest entry is {newest and newest.group(1)!r}, not version {version}")
    return tag, found


def main(root: Path) -> int:
    tag, found = problems(root)
    if found:
        print(f"release {tag}: {len(found)} disagreement(s)", *found, sep="\n  ")
        return 1
    print(f"Everything names {tag}. With `make test` green on a clean clone, create and push the release:\n"
          f"  git tag -a {tag} -m 'lmbook {tag}' && git push origin {tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]))
