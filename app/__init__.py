"""The Streamlit app: reads Bundles and draws them. It never imports JAX."""
