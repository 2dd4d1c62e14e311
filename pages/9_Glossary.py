"""Glossary: the serving terms the lessons use, alphabetically, each with its vLLM name; a search box filters them."""

import streamlit as st

from ui import glossary, page
from ui.wording import plain

page.setup("Glossary")
st.title("Glossary")
st.caption("The words the lessons use, in one or two sentences each, with their names in vLLM (V1) where they have "
           "one. A lesson links a term here at its first use.")
query = st.text_input("Search the terms", key="glossary.search", placeholder="a word: block, TTFT, max_num_seqs")
terms = glossary.matching(query)
if not terms:
    st.info(f"No term holds every word of “{plain(query, 80)}”. Clear the search to see them all.")
for term in terms:
    st.subheader(term.name, anchor=term.anchor)
    st.markdown(term.text + (f"  \n*In vLLM:* {term.vllm}" if term.vllm else ""))
