"""The Markdown and HTML renderers say the same thing; the HTML page is self-contained."""
from reports.document import Bullets, Figure, Heading, Paragraph, Table, to_html, to_markdown

BLOCKS = [Heading(1, "Report"), Paragraph("a < b & c"), Bullets(["one", "two"]),
          Table(["Row", "Value"], [["x|y", "1"]]), Figure("figures/f.png", b"\x89PNG fake", "a figure")]


def test_markdown():
    text = to_markdown(BLOCKS)
    assert text.startswith("# Report\n\na < b & c\n\n- one\n- two\n")
    assert "| x\\|y | 1 |" in text and "![a figure](figures/f.png)" in text


def test_html_is_escaped_and_self_contained():
    page = to_html(BLOCKS, "Report")
    assert "a &lt; b &amp; c" in page and "<td>x|y</td>" in page
    assert 'src="data:image/png;base64,iVBORyBmYWtl"' in page
    assert "http" not in page.replace("https://", "").split("<body>")[1]  # no external resources
