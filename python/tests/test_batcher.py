"""vit.Batcher from Python: classify_encoded calls from 8 threads run in shared batches and each gets what
Classifier.classify_encoded gives its images alone (same top-5, probabilities within 1e-6); a call past
max_queue raises at once; bad options are named. CTest label python, with the module just built."""
import threading

import pytest

import vit
from test_vit import DEIT, PHOTOS, require_shared_data


def test_threads_share_batches_and_get_their_own_answers():
    require_shared_data()
    c = vit.Classifier(str(DEIT), batch=16)
    photos = sorted(PHOTOS.glob("*.JPEG"))[:48]
    images = [(p.name, p.read_bytes()) for p in photos]
    alone = {r["file"]: r for r in c.classify_encoded(images, topk=5)}
    b = vit.Batcher(c, max_batch=16, max_delay_ms=20)
    got, lock = {}, threading.Lock()

    def client(share):
        for item in share:
            (r,) = b.classify_encoded([item], topk=5)
            with lock:
                got[r["file"]] = r

    threads = [threading.Thread(target=client, args=(images[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert set(got) == set(alone)
    for name, r in got.items():
        assert [t["index"] for t in r["top"]] == [t["index"] for t in alone[name]["top"]], name
        for t, u in zip(r["top"], alone[name]["top"]):
            assert abs(t["prob"] - u["prob"]) <= 1e-6
    assert b.classify_encoded([]) == []
    bad = b.classify_encoded([("junk", b"not an image")])
    assert "error" in bad[0] and bad[0]["file"] == "junk"
    b.close()
    with pytest.raises(RuntimeError, match=r"the Batcher is closed \(close\(\) was called\)"):
        b.classify_encoded(images[:1])


def test_bad_batcher_options_are_named():
    require_shared_data()
    c = vit.Classifier(str(DEIT))
    with pytest.raises(Exception, match="max_queue \\(4\\) must hold at least max_batch \\(8\\)"):
        vit.Batcher(c, max_batch=8, max_queue=4)
    with pytest.raises(TypeError, match="classifier must be a vit.Classifier, got str"):
        vit.Batcher("not a classifier")
    with pytest.raises(TypeError, match="must be a \\(name, bytes\\) pair"):
        vit.Batcher(c).classify_encoded(["x"])
