# k0_floordiv_mod_mul_add_gt_sub: loop kernel, domain [16]
def kernel(in0_i, out0):
    n0 = in0_i.shape[0]
    # %constant = constant {value=3} : i32[]
    v_constant = np.int32(3)
    # %constant_1 = constant {value=5} : i32[]
    v_constant_1 = np.int32(5)
    # %constant_2 = constant {value=2} : i32[]
    v_constant_2 = np.int32(2)
    # %constant_3 = constant {value=0} : i32[]
    v_constant_3 = np.int32(0)
    total = n0
    for flat in range(cuda.grid(1), total, cuda.gridsize(1)):
        i0 = flat
        # %floordiv = floordiv %i, %constant : i32[16] loc(...)
        v_floordiv = np.int32(fj.floordiv_int(in0_i[i0], v_constant))
        # %mod = mod %floordiv, %constant_1 : i32[16] loc(...)
        v_mod = np.int32(fj.mod_int(v_floordiv, v_constant_1))
        # %mul = mul %i, %constant_2 : i32[16] loc(...)
        v_mul = np.int32((in0_i[i0] * v_constant_2))
        # %add = add %mod, %mul : i32[16] loc(...)
        v_add = np.int32((v_mod + v_mul))
        # %gt = gt %i, %constant_3 : bool[16] loc(...)
        v_gt = (in0_i[i0] > v_constant_3)
        # %sub = sub %add, %gt : i32[16] loc(...)
        v_sub = np.int32((v_add - np.int32(v_gt)))
        out0[i0] = v_sub


def launch(in0_i, out0):
    n0 = in0_i.shape[0]
    return (n0, 1)
