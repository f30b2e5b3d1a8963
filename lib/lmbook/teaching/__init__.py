"""Teaching: the exercises' self-checks (:mod:`lmbook.teaching.checks`, also importable as ``lmbook.checks``),
the student edition (:mod:`lmbook.teaching.student`) and the grader (:mod:`lmbook.teaching.grading`).

This layer uses the concept modules; no concept module imports it.
"""

from .student import BEGIN, END, stub_solution, student_notebook, write_student_edition  # noqa: F401
