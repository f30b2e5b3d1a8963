"""Sphinx extension: a "Discuss this page" link at the end of every chapter.

The link opens a new question in the repository's GitHub Discussions, titled with the chapter's name. The
repository is _config.yml's ``repository.url`` (Jupyter Book passes it on as the theme's ``repository_url``),
so a fork changes it in one place. Pages outside ``notebooks/`` get no link.
"""

import html
import re
from urllib.parse import quote


def discussion_url(repository_url: str, title: str) -> str:
    """The URL of a new Q&A discussion titled ``title`` in the GitHub repository at ``repository_url``."""
    return f"{repository_url.rstrip('/')}/discussions/new?category=q-a&title={quote(title)}"


def _add_link(app, pagename, templatename, context, doctree):
    repository = (app.config.html_theme_options or {}).get("repository_url", "")
    if not repository or not pagename.startswith("notebooks/") or "body" not in context:
        return
    title = html.unescape(re.sub(r"<[^>]+>", "", context.get("title", pagename)))
    url = html.escape(discussion_url(repository, title))
    context["body"] += (f'<p class="discuss-page"><a href="{url}">Discuss this page</a>: ask a question or '
                        "report a mistake on the book's GitHub Discussions.</p>")


def setup(app):
    app.connect("html-page-context", _add_link)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
