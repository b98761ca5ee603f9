# k0_floordiv_mod_mul_add_gt_sub: loop kernel, domain [16]
def kernel(in0_i, out0):
    fj.vector_width(512)
    n0 = in0_i.shape[0]
    for i0 in range(n0):
        # %floordiv = floordiv %i, %constant : i32[16] loc(...)
        v_floordiv = np.int32((in0_i[i0] // np.int32(3)))
        # %mod = mod %floordiv, %constant_1 : i32[16] loc(...)
        v_mod = np.int32((v_floordiv % np.int32(5)))
        # %mul = mul %i, %constant_2 : i32[16] loc(...)
        v_mul = np.int32((in0_i[i0] * np.int32(2)))
        # %add = add %mod, %mul : i32[16] loc(...)
        v_add = np.int32((v_mod + v_mul))
        # %gt = gt %i, %constant_3 : bool[16] loc(...)
        v_gt = (in0_i[i0] > np.int32(0))
        # %sub = sub %add, %gt : i32[16] loc(...)
        v_sub = np.int32((v_add - np.int32(v_gt)))
        out0[i0] = v_sub


def kernel_parallel(in0_i, out0):
    fj.vector_width(512)
    n0 = in0_i.shape[0]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_i[low:high], out0[low:high])
