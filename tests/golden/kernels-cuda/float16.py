# k0_mul_add: loop kernel, domain [8]
def kernel(in0_x, in1_y, out0):
    n0 = in0_x.shape[0]
    total = n0
    flat = cuda.grid(1)
    stride = cuda.gridsize(1)
    while flat + 3 * stride < total:     # (4 elements a trip: every load issued before the first store)
        f0 = flat
        i0_0 = f0
        f1 = flat + stride
        i0_1 = f1
        f2 = flat + 2 * stride
        i0_2 = f2
        f3 = flat + 3 * stride
        i0_3 = f3
        e1 = in0_x[i0_0]
        e2 = in1_y[i0_0]
        e3 = in0_x[i0_1]
        e4 = in1_y[i0_1]
        e5 = in0_x[i0_2]
        e6 = in1_y[i0_2]
        e7 = in0_x[i0_3]
        e8 = in1_y[i0_3]
        # %mul = mul %x, %y : f16[8] loc(...)
        v0_mul = fj.round_float16(np.float32((e1 * e2)))
        # %mul = mul %x, %y : f16[8] loc(...)
        v1_mul = fj.round_float16(np.float32((e3 * e4)))
        # %mul = mul %x, %y : f16[8] loc(...)
        v2_mul = fj.round_float16(np.float32((e5 * e6)))
        # %mul = mul %x, %y : f16[8] loc(...)
        v3_mul = fj.round_float16(np.float32((e7 * e8)))
        # %add = add %mul, %constant : f16[8] loc(...)
        v0_add = fj.round_float16(np.float32((v0_mul + np.float32(1.5))))
        # %add = add %mul, %constant : f16[8] loc(...)
        v1_add = fj.round_float16(np.float32((v1_mul + np.float32(1.5))))
        # %add = add %mul, %constant : f16[8] loc(...)
        v2_add = fj.round_float16(np.float32((v2_mul + np.float32(1.5))))
        # %add = add %mul, %constant : f16[8] loc(...)
        v3_add = fj.round_float16(np.float32((v3_mul + np.float32(1.5))))
        out0[i0_0] = v0_add
        out0[i0_1] = v1_add
        out0[i0_2] = v2_add
        out0[i0_3] = v3_add
        flat += 4 * stride
    while flat < total:            # (a grid-stride loop; range() would divide for its trip count)
        i0 = flat
        # %mul = mul %x, %y : f16[8] loc(...)
        v_mul = fj.round_float16(np.float32((in0_x[i0] * in1_y[i0])))
        # %add = add %mul, %constant : f16[8] loc(...)
        v_add = fj.round_float16(np.float32((v_mul + np.float32(1.5))))
        out0[i0] = v_add
        flat += stride


def launch(in0_x, in1_y, out0):
    n0 = in0_x.shape[0]
    return (n0, 1)
