"""The hostile corpus: one case per hole a red team found (``conftest`` says what each module checks)."""
