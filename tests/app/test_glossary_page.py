"""The Glossary page through AppTest: every term under its own anchor, alphabetically, and the search box filters."""

from tests.app.conftest import assert_clean, open_page
from ui import glossary
from ui.page import navigation

PAGE = "pages/9_Glossary.py"


def test_glossary_page_lists_every_term_alphabetically_with_its_anchor():
    at = open_page(PAGE)
    assert_clean(at)
    assert (PAGE, "Glossary", ":material/menu_book:") in navigation()  # in the navigation
    headings = [h.value for h in at.subheader]
    assert headings == [t.name for t in glossary.sorted_terms()]
    assert [h.proto.anchor for h in at.subheader] == [t.anchor for t in glossary.sorted_terms()]
    text = " ".join(m.value for m in at.markdown)
    assert "*In vLLM:* `--max-num-seqs`" in text


def test_the_search_box_filters_the_terms():
    at = open_page(PAGE)
    at.text_input(key="glossary.search").input("swap").run()
    assert_clean(at)
    assert [h.value for h in at.subheader] == ["Swap"]
    at.text_input(key="glossary.search").input("zzz").run()
    assert not at.subheader
    assert "No term holds every word of “zzz”" in at.info[0].value
