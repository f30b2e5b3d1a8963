"""Sphinx extension: small fixes that keep the site's browser console clean.

- Jupyter Book 1 registers sphinx-thebe twice, so its inline ``const THEBE_JS_URL`` script appears twice in
  every page and the second copy throws (one copy has filename None, the other ""). Duplicate script
  entries are dropped.
- Sphinx adds MathJax only to pages where it registered equations, and misses the math in the Markdown
  pages' tables (the notation page). Pages whose HTML holds math are marked as having equations.
"""


def _fix_page_assets(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        attributes = getattr(script, "attributes", {}) or {}
        key = (getattr(script, "filename", None) or "", attributes.get("body"))  # None and "" both mean inline
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"][:] = unique  # in place: later handlers (MathJax) add to this same list
    if 'class="math' in context.get("body", ""):
        app.env.get_domain("math").data["has_equations"][pagename] = True  # read by sphinx.ext.mathjax


def setup(app):
    app.connect("html-page-context", _fix_page_assets, priority=100)  # early: a later handler may end the event
    return {"parallel_read_safe": True, "parallel_write_safe": True}
