"""Sentence helpers of the lessons."""

from ui.wording import count, join_and, pct_change


def test_count_puts_the_noun_in_the_right_number():
    assert count(1, "request") == "1 request"
    assert count(0, "batch slot") == "0 batch slots"
    assert count(2345, "request") == "2,345 requests"
    assert count(3, "query", "queries") == "3 queries" and count(1, "query", "queries") == "1 query"


def test_join_and_lists_in_prose():
    assert join_and([]) == "" and join_and(["A"]) == "A"
    assert join_and(["A", "C"]) == "A and C"
    assert join_and(("A", "C", "D")) == "A, C and D"


def test_pct_change_never_reads_minus_zero():
    assert pct_change(1100, 500) == "-55%"
    assert pct_change(100, 130) == "+30%"
    assert pct_change(243, 242) == "-0.4%"  # not "-0%", which reads as no change presented as one


def test_pool_caption_counts_blocks_and_tokens_in_the_right_number():
    from sim.config import EngineConfig
    from ui.knobs import pool_caption

    assert pool_caption(EngineConfig(num_blocks=1, block_size=1)).startswith(
        "KV pool: **1 block = 128 KiB** (128 KiB per block of 1 token")
    assert pool_caption(EngineConfig(num_blocks=999)).startswith("KV pool: **999 blocks = 1.95 GiB** (2 MiB per block "
                                                                 "of 16 tokens")


def test_halves_round_up_as_people_round_them():
    from ui.wording import fmt_fixed, fmt_gib

    assert fmt_gib(3.125) == "3.13 GiB"  # Python's format gives "3.12": the binary value rounded to even
    assert fmt_fixed(0.625) == "0.63" and fmt_fixed(5.2428) == "5.24" and fmt_fixed(1234.5, 0) == "1,235"
    assert fmt_gib(1.953125) == "1.95 GiB"


def test_plain_text_is_escaped_cut_and_never_links_by_itself():
    from ui.wording import plain

    zw = "\u200b"  # the zero-width space that keeps a bare URL, www. or an address from becoming a link
    assert plain("**M** [l](https://e.com) <b>") == f"\\*\\*M\\*\\* \\[l\\]\\(https\\:{zw}//e.com\\) \\<b\\>"
    assert plain("$x$ :red[r] WWW.e.com a@e.com") == f"\\$x\\$ \\:{zw}red\\[r\\] WWW{zw}.e.com a@{zw}e.com"
    assert plain("one\ntwo   three") == "one two three"
    assert plain("x" * 500, limit=10) == "x" * 10 + "…"


def test_sizes_of_any_model_read_in_a_unit_that_fits():
    from ui.wording import fmt_binary_size, fmt_gib

    assert [fmt_binary_size(n) for n in (2, 1023, 1024, 131_072, 2**21, 3 * 2**29)] == [
        "2 B", "1,023 B", "1 KiB", "128 KiB", "2 MiB", "1.5 GiB"]
    assert fmt_gib(2 / 2**30) == "2 B" and fmt_gib(1.5) == "1.50 GiB"


def test_number_word_spells_small_numbers_and_writes_larger_ones():
    from ui.wording import number_word

    assert [number_word(n) for n in (1, 3, 8, 12)] == ["one", "three", "eight", "twelve"]
    assert number_word(16) == "16" and number_word(1200) == "1,200"
