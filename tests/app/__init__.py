"""Tests of ``app/``, the Streamlit app, through Streamlit's AppTest."""
