"""Program-config helpers shared by several demos, in the style of Falcon-40B's ``model_utils.py``: a 2-D
multicast matmul config built from the two operands' shapes, through a second helper that takes the sizes in
elements. Every choice they make on their flags is static wherever a caller passes constants."""

import math

import ttnn

TILE = 32


def mm2d_config(
    m,
    k,
    n,
    grid=ttnn.CoreGrid(x=8, y=8),  # noqa: B008 (tt-metal writes it so)
    activation=None,
    fp32_acc=False,
    transposed=False,
    force_in0_w=None,
    force_sub_w=None,
    force_sub_h=None,
    fuse_batch=True,
):
    if transposed:
        cols, rows = grid.y, grid.x
    else:
        cols, rows = grid.x, grid.y
    assert m % (TILE * rows) == 0, f"{m} rows do not split over {rows} rows of cores"
    block_m = m // TILE // rows
    block_n = math.ceil(n / TILE / cols)
    k_tiles = k // TILE
    # the destination register holds half as many tiles when it accumulates in float32
    if fp32_acc:
        dst_tiles = 4
    else:
        dst_tiles = 8
    sub_w = max(w for w in range(1, dst_tiles + 1) if block_n % w == 0)
    sub_h = max(h for h in range(1, dst_tiles + 1) if block_m % h == 0 and h * sub_w <= dst_tiles)
    # big output blocks leave little room for the input blocks: one K tile at a time
    if block_m * block_n >= 4:
        in0_w = 1
    else:
        in0_w = k_tiles
    if force_in0_w is not None:
        in0_w = force_in0_w
    if force_sub_w is not None:
        sub_w = force_sub_w
    if force_sub_h is not None:
        sub_h = force_sub_h
    return ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(
        compute_with_storage_grid_size=(grid.x, grid.y),
        in0_block_w=in0_w,
        out_subblock_h=sub_h,
        out_subblock_w=sub_w,
        per_core_M=block_m,
        per_core_N=block_n,
        transpose_mcast=transposed,
        fused_activation=activation,
        fuse_batch=fuse_batch,
    )


def mm2d_config_for(
    a_shape,
    b_shape,
    grid=ttnn.CoreGrid(x=8, y=8),  # noqa: B008 (tt-metal writes it so)
    activation=None,
    fp32_acc=False,
    force_sub_h=None,
    force_sub_w=None,
    fuse_batch=True,
):
    m = a_shape[0] * a_shape[1] * a_shape[2]
    return mm2d_config(
        m,
        a_shape[3],
        b_shape[3],
        grid,
        activation,
        fp32_acc,
        force_sub_h=force_sub_h,
        force_sub_w=force_sub_w,
        fuse_batch=fuse_batch,
    )
