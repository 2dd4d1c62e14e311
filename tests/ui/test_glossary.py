"""The glossary (ui/glossary.py): every term the issue lists is there in one or two sentences, anchors are unique,
term_link points at the entry, and the search filters."""

import re

import pytest

from ui import glossary

# Issue 21, item 3, and the time between tokens (TBT) the brief adds.
ISSUE_TERMS = ("prefill", "decode", "engine step", "KV block", "block table", "pool", "max_num_seqs", "token budget",
               "max_num_batched_tokens", "chunked prefill", "head-of-line blocking", "TTFT", "queueing delay",
               "goodput", "VTC", "counter lift", "LCF", "rate limit", "abort", "stop check", "preemption",
               "recompute", "swap", "prefix cache", "TBT")


@pytest.mark.parametrize("name", ISSUE_TERMS)
def test_every_term_of_the_issue_is_in_the_glossary(name):
    term = glossary.term(name)
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", term.text) if s]
    assert 1 <= len(sentences) <= 2, term.text
    assert len(term.text) <= 320  # (one or two plain sentences, not a paragraph)


def test_the_token_budget_is_one_term_under_both_names_and_says_its_vllm_flag():
    assert glossary.term("token budget") is glossary.term("max_num_batched_tokens")
    assert "`--max-num-batched-tokens`" in glossary.term("token budget").vllm
    assert glossary.term("Max_Num_Seqs").vllm == "`--max-num-seqs`"  # case and separators ignored


def test_anchors_are_unique_and_url_safe():
    anchors = [t.anchor for t in glossary.TERMS]
    assert len(set(anchors)) == len(anchors) == 28
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", a) for a in anchors)
    assert glossary.term("TTFT").anchor == "ttft"
    assert glossary.term("max_num_batched_tokens").anchor == "token-budget"


def test_term_link_is_a_relative_markdown_link_to_the_entry():
    assert glossary.term_link("TTFT") == "[TTFT](Glossary#ttft)"
    assert glossary.term_link("max_num_seqs", "batch slots") == "[batch slots](Glossary#max-num-seqs)"
    assert glossary.term_link("head-of-line blocking") == "[head-of-line blocking](Glossary#head-of-line-blocking)"
    assert glossary.term_link("KV block", "a [block]") == "[a \\[block\\]](Glossary#kv-block)"


def test_an_unknown_term_is_refused_with_the_list_of_terms():
    with pytest.raises(ValueError, match=r"term 'batch' is not in the glossary; its terms: Abort, Admission "):
        glossary.term_link("batch")


def test_terms_sort_alphabetically_ignoring_case_and_underscores():
    names = [t.name for t in glossary.sorted_terms()]
    assert names[:3] == ["Abort", "Admission control", "Block table"]
    assert names.index("max_num_seqs") == names.index("LCF (least counter first)") + 1


def test_matching_filters_on_every_word_of_the_query():
    assert len(glossary.matching("")) == len(glossary.TERMS)
    assert [t.name for t in glossary.matching("ttft")] == ["Goodput", "SLO (service-level objective)",
                                                           "TTFT (time to first token)"]  # (goodput's vLLM flag)
    assert [t.name for t in glossary.matching("inter-token")] == ["TBT (time between tokens)"]  # the vLLM metric
    assert {t.name for t in glossary.matching("counter lift")} == {"Counter lift", "LCF (least counter first)"}
    assert glossary.matching("no such word") == []
