"""Sphinx extension: show each exercise's kind (drill, transfer, proof, project) at the top of the exercise.

A chapter labels an exercise with ``:class: transfer proof`` after its ``:label:``; this adds a short line,
"Transfer · Proof", as the first paragraph of the exercise, so readers and instructors see what each one asks
for. Classes that are not kinds are left alone.
"""

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx_exercise.nodes import exercise_enumerable_node, exercise_node

KINDS = ("drill", "transfer", "proof", "project")


class LabelExerciseKinds(SphinxTransform):
    default_priority = 15  # after sphinx-exercise merges gated exercises (priority 10)

    def apply(self):
        for node in list(self.document.findall(lambda n: isinstance(n, (exercise_node, exercise_enumerable_node)))):
            kinds = [k for k in KINDS if k in node["classes"]]
            body = next((child for child in node.children if isinstance(child, nodes.section)), None)
            if kinds and body is not None:
                line = nodes.paragraph("", " · ".join(k.capitalize() for k in kinds), classes=["exercise-kind"])
                body.insert(0, line)


def setup(app):
    app.add_transform(LabelExerciseKinds)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
