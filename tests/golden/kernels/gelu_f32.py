# k0_mul_add_mul_tanh_add_mul: loop kernel, domain [32]
def kernel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    for i0 in range(n0):
        # %mul = mul %constant, %x : f32[32] loc(...)
        v_mul = np.float32((np.float32(0.5) * in0_x[i0]))
        # %mul_1 = mul %constant_1, %x : f32[32] loc(...)
        v_mul_1 = np.float32((np.float32(0.044714998453855515) * in0_x[i0]))
        # %mul_2 = mul %mul_1, %x : f32[32] loc(...)
        v_mul_2 = np.float32((v_mul_1 * in0_x[i0]))
        # %mul_3 = mul %mul_2, %x : f32[32] loc(...)
        v_mul_3 = np.float32((v_mul_2 * in0_x[i0]))
        # %add = add %x, %mul_3 : f32[32] loc(...)
        v_add = np.float32((in0_x[i0] + v_mul_3))
        # %mul_4 = mul %constant_2, %add : f32[32] loc(...)
        v_mul_4 = np.float32((np.float32(0.7978845834732056) * v_add))
        # %tanh = tanh %mul_4 : f32[32] loc(...)
        v_tanh = np.float32(fj.tanh_f32(v_mul_4))
        # %add_1 = add %constant_3, %tanh : f32[32] loc(...)
        v_add_1 = np.float32((np.float32(1.0) + v_tanh))
        # %mul_5 = mul %mul, %add_1 : f32[32] loc(...)
        v_mul_5 = np.float32((v_mul * v_add_1))
        out0[i0] = v_mul_5


def kernel_parallel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_x[low:high], out0[low:high])
