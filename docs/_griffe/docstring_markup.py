"""Griffe extension for the API reference: docstrings written for doctest and Sphinx read well as Markdown.

kvwire's docstrings put runnable examples (checked by ``tests/test_docs.py``) in their text, where Markdown would
read them as a paragraph (and ``[...]`` outputs as links), and name other objects with Sphinx roles
(``:func:`load_sweep```). Each run of lines that starts with ``>>>`` at the docstring's own indentation, up to the
next blank line, is fenced as a ``pycon`` block, and each role becomes a code span.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: A Sphinx cross-reference role: ``:func:`name```, ``:class:`~kvwire.SimResult```, ...
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj):`~?([^`]+)`")


def fence_examples(text: str) -> str:
    """``text`` with every run of ``>>>`` lines and their output fenced as ``pycon``."""
    out: list[str] = []
    inside = fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and not inside and line.startswith(">>>"):
            out.append("```pycon")
            inside = True
        elif inside and not line.strip():
            out.append("```")
            inside = False
        out.append(line)
    if inside:
        out.append("```")
    return "\n".join(out)


def markdown(text: str) -> str:
    """A docstring's text as Markdown: examples fenced, Sphinx roles as code spans."""
    return ROLE.sub(r"`\1`", fence_examples(text) if ">>>" in text else text)


class DocstringMarkup(griffe.Extension):
    """Rewrites every docstring as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
