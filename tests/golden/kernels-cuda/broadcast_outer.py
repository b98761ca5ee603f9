# k0_sub_exp: loop kernel, domain [4,8]
def kernel(in0_reshape, in1_reshape_1, out0):
    n0 = in0_reshape.shape[0]
    n1 = in1_reshape_1.shape[1]
    total = n0 * n1
    flat = cuda.grid(1)
    stride = cuda.gridsize(1)
    while flat < total:            # (a grid-stride loop; range() would divide for its trip count)
        i1 = flat % n1
        rest = flat // n1
        i0 = rest
        # %sub = sub %reshape, %reshape_1 : f32[4,8] loc(...)
        v_sub = np.float32((in0_reshape[i0, 0] - in1_reshape_1[0, i1]))
        # %exp = exp %sub : f32[4,8] loc(...)
        v_exp = np.float32(math.exp(v_sub))
        out0[i0, i1] = v_exp
        flat += stride


def launch(in0_reshape, in1_reshape_1, out0):
    n0 = in0_reshape.shape[0]
    n1 = in1_reshape_1.shape[1]
    return (n0 * n1, 1)
