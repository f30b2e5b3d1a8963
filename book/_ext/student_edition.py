"""Sphinx extension: build the student edition of the site, without the exercises' solutions.

With the environment variable HIDE_SOLUTIONS=1, every sphinx-exercise solution (gated
``solution-start`` / ``solution-end`` blocks included) is removed from the documents after
sphinx-exercise has merged the gated blocks. sphinx-exercise's own ``hide_solutions`` option
fails on gated solutions, hence this extension. Without the variable it does nothing.
"""

import os

from sphinx.transforms import SphinxTransform
from sphinx_exercise.nodes import solution_node


class RemoveSolutions(SphinxTransform):
    default_priority = 20  # after sphinx-exercise's MergeGatedSolutions (priority 10)

    def apply(self):
        for node in list(self.document.findall(solution_node)):
            node.parent.remove(node)


def setup(app):
    if os.environ.get("HIDE_SOLUTIONS") == "1":
        app.add_transform(RemoveSolutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
