"""A report as a list of blocks, rendered to Markdown and to one self-contained HTML page.

Both renderers read the same blocks, so the two files always say the same
thing; the HTML page embeds every figure as a base64 PNG.
"""
from __future__ import annotations

import base64
import html
from dataclasses import dataclass


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str = ""  # the target of Links "#anchor" (an id in HTML, an <a id> line in Markdown)


@dataclass(frozen=True)
class Link:
    """A link inside a paragraph's or a table cell's place: ``text`` pointing at ``href``."""

    text: str
    href: str


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str | Link]]


@dataclass(frozen=True)
class Figure:
    """A PNG written next to the report (``path`` relative to it) and embedded in the HTML."""

    path: str
    png: bytes
    caption: str


@dataclass(frozen=True)
class Contents:
    """A table of contents: (level, text, anchor) of the headings it lists."""

    entries: list[tuple[int, str, str]]


Block = Heading | Paragraph | Bullets | Table | Figure | Contents


def slug(text: str, taken: set[str]) -> str:
    """An anchor for a heading: lower-case words joined by '-', made unique against ``taken``."""
    base = "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())[:60] or "section"
    anchor, k = base, 2
    while anchor in taken:
        anchor, k = f"{base}-{k}", k + 1
    taken.add(anchor)
    return anchor


def with_contents(blocks: list[Block], at: int, depth: int = 3) -> list[Block]:
    """``blocks`` with every heading of level 2..depth anchored and a Contents block listing them at ``at``."""
    taken = {block.anchor for block in blocks if isinstance(block, Heading) and block.anchor}
    out = [Heading(block.level, block.text, slug(block.text, taken))
           if isinstance(block, Heading) and 2 <= block.level <= depth and not block.anchor else block
           for block in blocks]
    entries = [(block.level, block.text, block.anchor) for block in out
               if isinstance(block, Heading) and 2 <= block.level <= depth]
    return out[:at] + [Contents(entries)] + out[at:]

STYLE = """
body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:.6rem 0 1.2rem;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.2rem .45rem;text-align:left;vertical-align:top}
th{background:#f2f2f2} tr:nth-child(even) td{background:#fafafa}
figure{margin:1rem 0} figure img{max-width:100%} figcaption{font-size:.85rem;color:#555}
h1,h2,h3,h4{margin-top:1.8rem}
nav ul{list-style:none;padding-left:0;display:flex;flex-wrap:wrap;gap:.2rem 1.2rem;margin:.3rem 0}
nav li.toc3{font-size:.9rem}
"""


def _md_cell(cell: str | Link) -> str:
    text = f"[{cell.text}]({cell.href})" if isinstance(cell, Link) else str(cell)
    return text.replace("|", "\\|").replace("\n", " ")


def _html_cell(cell: str | Link) -> str:
    if isinstance(cell, Link):
        return f"<a href=\"{html.escape(cell.href)}\">{html.escape(cell.text)}</a>"
    return html.escape(str(cell))


def to_markdown(blocks: list[Block]) -> str:
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            lines += (([f'<a id="{block.anchor}"></a>', ""] if block.anchor else [])
                      + ["#" * block.level + " " + block.text, ""])
        elif isinstance(block, Paragraph):
            lines += [block.text, ""]
        elif isinstance(block, Bullets):
            lines += [f"- {item}" for item in block.items] + [""]
        elif isinstance(block, Table):
            lines += ["| " + " | ".join(map(_md_cell, block.header)) + " |", "|" + "---|" * len(block.header)]
            lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in block.rows] + [""]
        elif isinstance(block, Contents):
            lines += ["**Contents**", ""] + [f"{'  ' * (level - 2)}- [{text}](#{anchor})"
                                             for level, text, anchor in block.entries]
            lines += [""]
        else:
            lines += [f"![{block.caption}]({block.path})", "", f"*{block.caption}*", ""]
    return "\n".join(lines)


def to_html(blocks: list[Block], title: str) -> str:
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"]
    for block in blocks:
        if isinstance(block, Heading):
            anchor = f' id="{html.escape(block.anchor)}"' if block.anchor else ""
            parts.append(f"<h{block.level}{anchor}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{html.escape(block.text)}</p>")
        elif isinstance(block, Bullets):
            parts.append("<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in block.items) + "</ul>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in block.header)
            body = "".join("<tr>" + "".join(f"<td>{_html_cell(cell)}</td>" for cell in row) + "</tr>"
                           for row in block.rows)
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif isinstance(block, Contents):
            items = "".join(f"<li class=\"toc{level}\"><a href=\"#{html.escape(anchor)}\">{html.escape(text)}</a></li>"
                            for level, text, anchor in block.entries)
            parts.append(f"<nav id=\"contents\"><strong>Contents</strong><ul>{items}</ul></nav>")
        else:
            data = base64.b64encode(block.png).decode()
            parts.append(f"<figure><img alt=\"{html.escape(block.caption)}\" src=\"data:image/png;base64,{data}\">"
                         f"<figcaption>{html.escape(block.caption)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
