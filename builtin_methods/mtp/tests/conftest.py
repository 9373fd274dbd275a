import os

# Triton kernels run on CPU through the interpreter; it must be chosen before triton loads.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from specpath_engine.testing.fixtures import one_torch_thread  # noqa: F401,E402  (autouse: one torch thread a test)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """A float64 random-weight target (so no near-tie flips a greedy choice) with random 1-, 2-
    and 3-module MTP checkpoints shaped for it; one of each input order."""
    from specpath_drafting.testing import drafting_target
    from specpath_mtp.module import random_mtp_checkpoint

    root = tmp_path_factory.mktemp("mtp")
    target = drafting_target(root / "target", seed=3)
    paths = {"target": root / "target"}
    for n, order in ((1, ("embedding", "hidden")), (2, ("hidden", "embedding")), (3, ("embedding", "hidden"))):
        paths[n] = random_mtp_checkpoint(root / "target", root / f"mtp{n}", n, seed=n, order=order)
    return target, paths
