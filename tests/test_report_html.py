"""The HTML report shows the text it holds: markers and excerpts with angle brackets are escaped, not dropped."""

from fedmem.reports.pages import markdown_to_html


def test_redaction_markers_and_excerpts_survive_in_the_html():
    md = ("| prefix | suffix |\n|---|---|\n| <redacted sha256:0123456789ab len=42> | a <b>bold</b> & more |\n\n"
          "> **Note.** far from memorizing\n\n![curve](curves_mr.png)")
    html = markdown_to_html(md, "round 1")
    assert "&lt;redacted sha256:0123456789ab len=42&gt;" in html
    assert "a &lt;b&gt;bold&lt;/b&gt; &amp; more" in html and "<b>bold" not in html
    assert "<blockquote>" in html and '<img alt="curve" src="curves_mr.png"' in html  # Markdown still renders
