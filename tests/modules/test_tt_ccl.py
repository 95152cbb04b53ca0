"""TT_CCL: double-buffered semaphores per collective kind and axis; one shared instance per mesh."""

from __future__ import annotations

import pytest

from tttv2.modules import TT_CCL, clear_tt_ccl_cache, get_tt_ccl


def test_handles_alternate_per_kind_and_axis(ttnn_mesh_pool):
    ccl = TT_CCL(ttnn_mesh_pool((1, 2)))
    first, second, third = (ccl.get_and_cycle_rs_semaphore_handles() for _ in range(3))
    assert len(first) == 3 and first is not second and third is first  # double-buffered
    ag = ccl.get_and_cycle_ag_semaphore_handles(cluster_axis=1)
    assert len(ag) == 2 and ag is not ccl.get_and_cycle_ag_semaphore_handles(cluster_axis=0)
    barrier = ccl.get_and_cycle_barrier_semaphore_handle(cluster_axis=0)
    assert not isinstance(barrier, list)
    # the axis-0 bank is independent of the others: it starts at its own first buffer
    assert ccl.get_and_cycle_rs_semaphore_handles(cluster_axis=0) is not first
    with pytest.raises(ValueError, match=r"cluster_axis must be 0, 1 or None, got 2"):
        ccl.get_and_cycle_rs_semaphore_handles(cluster_axis=2)
    with pytest.raises(ValueError, match=r"cluster_axis must be 0, 1 or None, got True"):
        ccl.get_and_cycle_ag_semaphore_handles(cluster_axis=True)


def test_links_and_bad_mesh(ttnn_mesh_pool):
    assert TT_CCL(ttnn_mesh_pool((1, 1))).get_num_links() == 0
    assert TT_CCL(ttnn_mesh_pool((1, 2))).get_num_links() >= 1
    with pytest.raises(ValueError, match=r"mesh_device must be a ttnn.MeshDevice, got str"):
        TT_CCL("1x2")


def test_shared_instance_per_mesh(ttnn_mesh_pool):
    a, b = ttnn_mesh_pool((1, 1)), ttnn_mesh_pool((1, 2))
    assert get_tt_ccl(a) is get_tt_ccl(a)
    assert get_tt_ccl(a) is not get_tt_ccl(b) and get_tt_ccl(b).mesh_device is b
    kept = get_tt_ccl(a)
    clear_tt_ccl_cache()
    assert get_tt_ccl(a) is not kept
