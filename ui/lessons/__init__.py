"""Per-lesson logic: knobs, variants and "what to notice" sentences (no Streamlit calls)."""
