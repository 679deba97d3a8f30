"""What the pytest suites share of their surroundings: the repository, ../shared/data (DeiT-Tiny and the sample
photos), the vit binary; and the one rule for anything a test needs that is missing: a skip naming it, a
failure under CI=true. The suites outside tests/ put this folder on sys.path to import it."""
import os
import pathlib

import pytest

REPO = pathlib.Path(os.environ.get("VIT_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[1]))
SHARED = pathlib.Path(os.environ.get("VIT_SHARED_DATA", REPO.parent / "shared" / "data"))
VIT_BINARY = os.environ.get("VIT_BINARY", str(REPO / "build" / "vit"))
DEIT = SHARED / "models" / "deit_tiny_patch16_224.fb_in1k"
PHOTOS = SHARED / "images" / "imagenet-samples"


def require(condition, what):
    """Skips when something the test needs is missing, except under CI=true, where that is a failure."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {what}")
    pytest.skip(f"{what}; skipping")


def require_shared_data():
    """Skips without ../shared/data, except under CI=true, where missing data is a failure."""
    require(DEIT.is_dir() and PHOTOS.is_dir(), f"the test data is missing at {SHARED} (set VIT_SHARED_DATA)")
