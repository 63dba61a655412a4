"""Assemble docs/PERFORMANCE.md: the hand-written summary at the top, then every benchmark's section.

Each benchmark writes its own section under docs/perf/ (so several can run independently) and then calls
``assemble()``, which replaces the generated part of docs/PERFORMANCE.md between the two markers.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "PERFORMANCE.md"
SECTIONS = ROOT / "docs" / "perf"
# Pipeline order: engine, data, build, scoring, runners, report.
ORDER = (
    "corruptions.md",
    "corruptions-v2.md",
    "sources.md",
    "build.md",
    "build-v2.md",
    "file_split.md",
    "png.md",
    "score.md",
    "score_process.md",
    "score_tools.md",
    "scoring.md",
    "runners.md",
    "report.md",
)
BEGIN = "<!-- BEGIN GENERATED: benchmarks/perfdoc.py assembles this part from docs/perf/*.md -->"
END = "<!-- END GENERATED -->"


def _shift_headings(text: str) -> str:
    """Section files use '##' for their title; nest everything one level under the document's '##'."""
    lines = []
    for line in text.splitlines():
        lines.append("#" + line if line.startswith("#") else line)
    return "\n".join(lines).strip() + "\n"


def assembled() -> str:
    """docs/PERFORMANCE.md as it should read: its hand-written part, then the sections of docs/perf/."""
    names = [n for n in ORDER if (SECTIONS / n).is_file()]
    names += sorted(p.name for p in SECTIONS.glob("*.md") if p.name not in ORDER)
    body = "\n".join(_shift_headings((SECTIONS / n).read_text(encoding="utf-8")) for n in names)
    generated = f"{BEGIN}\n\n## Detailed results\n\n{body}\n{END}\n"
    text = DOC.read_text(encoding="utf-8") if DOC.is_file() else "# Performance\n\n"
    if BEGIN in text and END in text:
        return text[: text.index(BEGIN)] + generated + text[text.index(END) + len(END) + 1 :]
    return text.rstrip() + "\n\n" + generated


def assemble() -> Path:
    DOC.write_text(assembled(), encoding="utf-8")
    return DOC


if __name__ == "__main__":
    print(assemble())
