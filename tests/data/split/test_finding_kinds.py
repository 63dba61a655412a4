"""The product holds no test-only code and no dead constants; what stays is used."""

from __future__ import annotations

import pytest

from aegis_data.split import verify


def test_every_finding_kind_is_one_the_split_doc_explains():
    assert verify.Finding("a.png", "pixels", "differ").kind == "pixels"
    for kind in verify.FINDING_KINDS:
        verify.Finding("a.png", kind, "")
    with pytest.raises(ValueError, match="unknown finding kind 'pixel'"):
        verify.Finding("a.png", "pixel", "a typo of pixels")
