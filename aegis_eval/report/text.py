"""User text (labels, dataset names, file names, rules) made safe for the report's documents.

A score JSON is written by anyone: its strings may hold line breaks, control characters, Markdown, HTML or
TeX. Every renderer passes them through here, so each shows as exactly the text it is, on one line.
"""

from __future__ import annotations

import html
import re
import unicodedata

# Control and format characters, line and paragraph separators: a run becomes one space. Lone surrogates (a
# non-UTF-8 file name read with surrogateescape) become U+FFFD, which every encoder can write.
_BREAKING = ("Cc", "Cf", "Zl", "Zp")


def one_line(s: str) -> str:
    """``s`` with every run of control / format characters and line or paragraph separators as one space."""
    out: list[str] = []
    for ch in str(s):
        cat = unicodedata.category(ch)
        if cat in _BREAKING:
            if not out or out[-1] != " ":
                out.append(" ")
        else:
            out.append("\ufffd" if cat == "Cs" else ch)
    return "".join(out)


# Markdown: characters that start markup anywhere in a line. `<` only matters before what opens a tag, a
# comment or an autolink (a letter, `/`, `!`, `?`; "fp_per_image<=2" stays); `[`, `]` and `!` only as `![` (an
# image) and `](` (a link target; intervals print as "[0.72, 0.81]"); `_` only at a word's edge (CommonMark
# never opens or closes emphasis between two letters or digits: low_light_s1); `&` only before a named entity
# reference ("&copy;" would show as the sign; "R&D" stays; `#` of a numeric one is escaped anyway). `>` only quotes
# at a line's start, and no user text starts a line.
_MD_MARKUP = re.compile(
    r"[\\`*|~$#]|<(?=[A-Za-z/!?])|!(?=\[)|(?<=\])\(|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"
    r"|&(?=[A-Za-z][A-Za-z0-9]*;)"
)


def md_text(s: str) -> str:
    """``s`` as Markdown that renders as exactly that text on one line: no raw HTML, autolink, link, image,
    emphasis, code span, math or heading can come out of it, and a ``|`` never splits a table cell."""
    return _MD_MARKUP.sub(lambda m: "\\" + m.group(0), one_line(s))


def html_text(s: str) -> str:
    """``s`` as HTML text (or an attribute value) that shows as exactly that text on one line."""
    return html.escape(one_line(s), quote=True)
