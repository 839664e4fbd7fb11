"""Whole journeys: real programs and the gallery compiled end to end, a big program, a user's
file, the recorded GPU compiles, and the app in a real browser (``test_browser`` starts it)."""
